//! Exporting the entity graph for graph tools (Gephi, Cytoscape, networkx): GraphML,
//! JSONL, or one CSV file per node and edge kind (docs/export.md).
//!
//! One walk ([`walk`]) visits the graph's nodes and edges in a fixed order and hands each
//! to a format's [`Sink`], which writes it at once through a buffered writer: nothing of
//! the document is held, and the graph is read where it lies (the only tables built are
//! one count per entity and the triples grouped by fact, 4 bytes a triple).
//!
//! What is exported, and how it relates to the counts of [`GraphStats`]:
//! - entity nodes (`stats.entities`) and passage nodes (`stats.passages`);
//! - `passage_entity` edges, passage to entity (`stats.passage_entity_edges`);
//! - `synonym` edges between entities with close vectors (`stats.synonym_edges`);
//! - `fact` edges, subject to object, one per fact (distinct triple text) whose subject
//!   and object are two different entities. `stats.facts` also counts the facts that have
//!   no such ends (an end that normalises to no entity, or both ends one entity), which
//!   the graph has no edge for: [`ExportCounts::facts_without_edge`]. The graph's
//!   `relation_edges` are the distinct unordered entity pairs of the fact edges
//!   ([`ExportCounts::fact_pairs`]).

mod csv;
mod graphml;
mod jsonl;

use std::path::Path;

use serde::Serialize;

pub(crate) use crate::files::Output;

use super::{EdgeKind, EntityGraph};
use crate::corpus::{Passage, PassageIdx};
use crate::error::{Error, Result};

pub use graphml::{write_xml_text, xml_allowed};

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One GraphML file (`-`: standard output).
    GraphMl,
    /// One JSON object a line, nodes then edges, each with a `type` (`node`, `edge`).
    Jsonl,
    /// A folder with one CSV file per node kind and per edge kind ([`csv::FILES`]).
    Csv,
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExportCounts {
    pub entity_nodes: usize,
    pub passage_nodes: usize,
    pub fact_edges: usize,
    pub synonym_edges: usize,
    pub passage_entity_edges: usize,
    /// Distinct unordered entity pairs among the fact edges: the graph's relation edges.
    pub fact_pairs: usize,
    /// Facts with no two distinct entities as subject and object: no edge.
    pub facts_without_edge: usize,
}

impl ExportCounts {
    pub fn nodes(&self) -> usize {
        self.entity_nodes + self.passage_nodes
    }

    pub fn edges(&self) -> usize {
        self.fact_edges + self.synonym_edges + self.passage_entity_edges
    }
}

/// A node's id in every format: `e` and the entity's number, or `p` and the passage's
/// position in the index (passage ids are the corpus's own strings, free to look like an
/// entity's; the passage's id is an attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeId {
    Entity(u32),
    Passage(PassageIdx),
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeId::Entity(e) => write!(f, "e{e}"),
            NodeId::Passage(p) => write!(f, "p{p}"),
        }
    }
}

impl Serialize for NodeId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

pub struct EntityNode<'a> {
    pub id: u32,
    /// The surface form the graph shows the entity by.
    pub name: &'a str,
    /// The normalised name that identifies the entity.
    pub key: &'a str,
    /// Passages that mention the entity.
    pub passage_count: u32,
}

pub struct PassageNode<'a> {
    pub idx: PassageIdx,
    pub passage: &'a Passage,
}

pub struct FactEdge<'a> {
    /// The fact's number (facts are numbered in order of first statement).
    pub fact: u32,
    pub subject: u32,
    pub object: u32,
    pub relation: &'a str,
    /// Positions of the passages stating the fact, ascending, each once.
    pub stating: &'a [PassageIdx],
    corpus: &'a [Passage],
}

impl<'a> FactEdge<'a> {
    /// The ids of the passages stating the fact.
    pub fn passage_ids(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.stating.iter().map(|&p| self.corpus[p as usize].id.as_str())
    }
}

pub struct SynonymEdge {
    pub a: u32,
    pub b: u32,
    /// The cosine of the two entities' vectors.
    pub similarity: f32,
}

/// What a format does with each node and edge, in the order [`walk`] gives them.
pub trait Sink {
    fn entity(&mut self, node: &EntityNode) -> std::io::Result<()>;
    fn passage(&mut self, node: &PassageNode) -> std::io::Result<()>;
    fn fact(&mut self, edge: &FactEdge) -> std::io::Result<()>;
    fn synonym(&mut self, edge: &SynonymEdge) -> std::io::Result<()>;
    fn passage_entity(&mut self, passage: PassageIdx, entity: u32) -> std::io::Result<()>;
}

/// Writes `graph` (whose passages are the first of `passages`, the index's) to `out` in
/// `format`; each file is written beside its target and renamed over it once complete.
pub fn export(graph: &EntityGraph, passages: &[Passage], format: Format, out: &Path) -> Result<ExportCounts> {
    match format {
        Format::GraphMl => {
            let mut output = Output::create(out)?;
            let counts = graphml::write(graph, passages, output.writer()).map_err(|e| Error::io(out, e))?;
            output.commit()?;
            Ok(counts)
        }
        Format::Jsonl => {
            let mut output = Output::create(out)?;
            let counts =
                walk(graph, passages, &mut jsonl::JsonlSink::new(output.writer())).map_err(|e| Error::io(out, e))?;
            output.commit()?;
            Ok(counts)
        }
        Format::Csv => csv::write(graph, passages, out),
    }
}

/// Visits every node, then every edge, of `graph`: entities, passages, facts, synonym
/// links, passage–entity links.
pub fn walk(graph: &EntityGraph, passages: &[Passage], sink: &mut dyn Sink) -> std::io::Result<ExportCounts> {
    let covered = graph.passage_entities.len();
    if passages.len() < covered {
        return Err(std::io::Error::other(format!(
            "the graph covers {covered} passages, the index has {}",
            passages.len()
        )));
    }
    let mut counts = ExportCounts::default();
    let mut passage_count = vec![0u32; graph.entities.len()];
    for &e in graph.passage_entities.iter().flatten() {
        passage_count[e as usize] += 1;
    }
    for (e, (key, name)) in graph.entities.iter().zip(&graph.labels).enumerate() {
        sink.entity(&EntityNode { id: e as u32, name, key, passage_count: passage_count[e] })?;
        counts.entity_nodes += 1;
    }
    drop(passage_count);
    for (p, passage) in passages[..covered].iter().enumerate() {
        sink.passage(&PassageNode { idx: p as PassageIdx, passage })?;
        counts.passage_nodes += 1;
    }
    walk_facts(graph, passages, sink, &mut counts)?;
    for edge in graph.edges.iter().filter(|e| e.kind == EdgeKind::Synonym) {
        sink.synonym(&SynonymEdge { a: edge.a, b: edge.b, similarity: edge.weight })?;
        counts.synonym_edges += 1;
    }
    for (p, entities) in graph.passage_entities.iter().enumerate() {
        for &e in entities {
            sink.passage_entity(p as PassageIdx, e)?;
            counts.passage_entity_edges += 1;
        }
    }
    Ok(counts)
}

/// The fact edges: the triples grouped by fact (a counting sort of triple numbers), each
/// fact's triples grouped by their (subject, object) entities. Triples of one fact share
/// their text, so nearly always their ends; where names split one text differently ("a
/// b" + "c", "a" + "b c") a fact gets one edge per pair of ends.
fn walk_facts(
    graph: &EntityGraph,
    passages: &[Passage],
    sink: &mut dyn Sink,
    counts: &mut ExportCounts,
) -> std::io::Result<()> {
    let facts = graph.fact_count();
    let mut starts = vec![0u32; facts + 1];
    for t in 0..graph.triples.len() {
        starts[graph.fact_of(t as u32) as usize + 1] += 1;
    }
    for f in 0..facts {
        starts[f + 1] += starts[f];
    }
    let mut by_fact = vec![0u32; graph.triples.len()];
    let mut next = starts.clone();
    for t in 0..graph.triples.len() as u32 {
        let slot = &mut next[graph.fact_of(t) as usize];
        by_fact[*slot as usize] = t;
        *slot += 1;
    }
    drop(next);
    // The unordered entity pairs already linked, to count the graph's relation edges.
    let mut pairs: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
    let mut ends: Vec<(u32, u32)> = Vec::new();
    let mut stating: Vec<PassageIdx> = Vec::new();
    for f in 0..facts {
        let triples = &by_fact[starts[f] as usize..starts[f + 1] as usize];
        ends.clear();
        for &t in triples {
            if let Some(pair) = graph.triple_entities[t as usize] {
                if !ends.contains(&pair) {
                    ends.push(pair);
                }
            }
        }
        if ends.is_empty() {
            counts.facts_without_edge += 1;
        }
        for &(subject, object) in &ends {
            stating.clear();
            let mut relation = None;
            for &t in triples.iter().filter(|&&t| graph.triple_entities[t as usize] == Some((subject, object))) {
                let triple = &graph.triples[t as usize];
                relation.get_or_insert(triple.predicate);
                stating.push(triple.passage);
            }
            stating.sort_unstable();
            stating.dedup();
            let relation = relation.expect("a pair comes from a triple");
            sink.fact(&FactEdge {
                fact: f as u32,
                subject,
                object,
                relation: &relation,
                stating: &stating,
                corpus: passages,
            })?;
            counts.fact_edges += 1;
            pairs.insert((subject.min(object), subject.max(object)));
        }
    }
    counts.fact_pairs = pairs.len();
    Ok(())
}

#[cfg(test)]
mod tests;
