//! CSV: a folder with one file per node kind and per edge kind (RFC 4180 quoting; the
//! `id`, `source` and `target` columns are what Gephi's spreadsheet import reads). Each
//! file is renamed over its target once all are complete.

use std::io::{self, Write};
use std::path::Path;

use super::graphml::json_list;
use super::{walk, EntityNode, ExportCounts, FactEdge, NodeId, Output, PassageNode, Sink, SynonymEdge};
use crate::corpus::{Passage, PassageIdx};
use crate::error::{Error, Result};
use crate::graph::EntityGraph;

/// The files and their header lines, in [`CsvSink`]'s order.
pub const FILES: [(&str, &str); 5] = [
    ("entity_nodes.csv", "id,name,key,passage_count"),
    ("passage_nodes.csv", "id,passage,title,doc"),
    ("fact_edges.csv", "source,target,relation,fact,passages,weight"),
    ("synonym_edges.csv", "source,target,weight"),
    ("passage_entity_edges.csv", "source,target"),
];

pub(super) fn write(graph: &EntityGraph, passages: &[Passage], folder: &Path) -> Result<ExportCounts> {
    std::fs::create_dir_all(folder).map_err(|e| Error::io(folder, e))?;
    let mut outputs = Vec::with_capacity(FILES.len());
    for (name, header) in FILES {
        let mut output = Output::create(&folder.join(name))?;
        writeln!(output.writer(), "{header}").map_err(|e| Error::io(folder.join(name), e))?;
        outputs.push(output);
    }
    let counts = {
        let [entities, passage_nodes, facts, synonyms, links] = &mut outputs[..] else { unreachable!("five files") };
        let mut sink = CsvSink {
            entities: entities.writer(),
            passages: passage_nodes.writer(),
            facts: facts.writer(),
            synonyms: synonyms.writer(),
            links: links.writer(),
            list: String::new(),
        };
        walk(graph, passages, &mut sink).map_err(|e| Error::io(folder, e))?
    };
    for output in outputs {
        output.commit()?;
    }
    Ok(counts)
}

struct CsvSink<'w> {
    entities: &'w mut dyn Write,
    passages: &'w mut dyn Write,
    facts: &'w mut dyn Write,
    synonyms: &'w mut dyn Write,
    links: &'w mut dyn Write,
    list: String,
}

/// Writes `field` quoted when it holds a comma, a quote or a line break (quotes doubled).
pub(super) fn write_field(out: &mut dyn Write, field: &str) -> io::Result<()> {
    if !field.contains([',', '"', '\n', '\r']) {
        return out.write_all(field.as_bytes());
    }
    out.write_all(b"\"")?;
    for (i, part) in field.split('"').enumerate() {
        if i > 0 {
            out.write_all(b"\"\"")?;
        }
        out.write_all(part.as_bytes())?;
    }
    out.write_all(b"\"")
}

impl Sink for CsvSink<'_> {
    fn entity(&mut self, node: &EntityNode) -> io::Result<()> {
        write!(self.entities, "{},", NodeId::Entity(node.id))?;
        write_field(self.entities, node.name)?;
        self.entities.write_all(b",")?;
        write_field(self.entities, node.key)?;
        writeln!(self.entities, ",{}", node.passage_count)
    }

    fn passage(&mut self, node: &PassageNode) -> io::Result<()> {
        let p = node.passage;
        write!(self.passages, "{},", NodeId::Passage(node.idx))?;
        for (i, field) in [p.id.as_str(), &p.title, p.document()].into_iter().enumerate() {
            if i > 0 {
                self.passages.write_all(b",")?;
            }
            write_field(self.passages, field)?;
        }
        self.passages.write_all(b"\n")
    }

    fn fact(&mut self, edge: &FactEdge) -> io::Result<()> {
        write!(self.facts, "{},{},", NodeId::Entity(edge.subject), NodeId::Entity(edge.object))?;
        write_field(self.facts, edge.relation)?;
        write!(self.facts, ",{},", edge.fact)?;
        self.list.clear();
        json_list(&mut self.list, edge.passage_ids());
        write_field(self.facts, &self.list)?;
        writeln!(self.facts, ",{}", edge.stating.len())
    }

    fn synonym(&mut self, edge: &SynonymEdge) -> io::Result<()> {
        writeln!(self.synonyms, "{},{},{}", NodeId::Entity(edge.a), NodeId::Entity(edge.b), edge.similarity)
    }

    fn passage_entity(&mut self, passage: PassageIdx, entity: u32) -> io::Result<()> {
        writeln!(self.links, "{},{}", NodeId::Passage(passage), NodeId::Entity(entity))
    }
}
