//! JSONL: one object a line, every node and then every edge, with `type` (`node` or
//! `edge`) and `kind` (`entity`, `passage`; `fact`, `synonym`, `passage_entity`).

use std::io::{self, Write};

use serde::Serialize;

use super::{EntityNode, FactEdge, NodeId, PassageNode, Sink, SynonymEdge};
use crate::corpus::PassageIdx;

pub(super) struct JsonlSink<'w> {
    out: &'w mut dyn Write,
}

impl<'w> JsonlSink<'w> {
    pub(super) fn new(out: &'w mut dyn Write) -> Self {
        JsonlSink { out }
    }

    fn line(&mut self, value: &impl Serialize) -> io::Result<()> {
        serde_json::to_writer(&mut *self.out, value)?;
        self.out.write_all(b"\n")
    }
}

#[derive(Serialize)]
struct Line<'a, T> {
    #[serde(rename = "type")]
    type_: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    fields: &'a T,
}

#[derive(Serialize)]
struct Entity<'a> {
    id: NodeId,
    name: &'a str,
    key: &'a str,
    passage_count: u32,
}

#[derive(Serialize)]
struct Passage<'a> {
    id: NodeId,
    passage: &'a str,
    title: &'a str,
    doc: &'a str,
}

#[derive(Serialize)]
struct Fact<'a> {
    source: NodeId,
    target: NodeId,
    relation: &'a str,
    fact: u32,
    passages: Vec<&'a str>,
    weight: usize,
}

#[derive(Serialize)]
struct Link {
    source: NodeId,
    target: NodeId,
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<f32>,
}

impl Sink for JsonlSink<'_> {
    fn entity(&mut self, node: &EntityNode) -> io::Result<()> {
        let fields =
            Entity { id: NodeId::Entity(node.id), name: node.name, key: node.key, passage_count: node.passage_count };
        self.line(&Line { type_: "node", kind: "entity", fields: &fields })
    }

    fn passage(&mut self, node: &PassageNode) -> io::Result<()> {
        let p = node.passage;
        let fields = Passage { id: NodeId::Passage(node.idx), passage: &p.id, title: &p.title, doc: p.document() };
        self.line(&Line { type_: "node", kind: "passage", fields: &fields })
    }

    fn fact(&mut self, edge: &FactEdge) -> io::Result<()> {
        let fields = Fact {
            source: NodeId::Entity(edge.subject),
            target: NodeId::Entity(edge.object),
            relation: edge.relation,
            fact: edge.fact,
            passages: edge.passage_ids().collect(),
            weight: edge.stating.len(),
        };
        self.line(&Line { type_: "edge", kind: "fact", fields: &fields })
    }

    fn synonym(&mut self, edge: &SynonymEdge) -> io::Result<()> {
        let fields =
            Link { source: NodeId::Entity(edge.a), target: NodeId::Entity(edge.b), weight: Some(edge.similarity) };
        self.line(&Line { type_: "edge", kind: "synonym", fields: &fields })
    }

    fn passage_entity(&mut self, passage: PassageIdx, entity: u32) -> io::Result<()> {
        let fields = Link { source: NodeId::Passage(passage), target: NodeId::Entity(entity), weight: None };
        self.line(&Line { type_: "edge", kind: "passage_entity", fields: &fields })
    }
}
