//! GraphML (http://graphml.graphdrawing.org), written as it is walked. The escaping is
//! written here rather than taken from an XML crate: it is five entities and a filter of
//! the characters XML 1.0 forbids, which XML writers leave to the caller anyway, and the
//! library needs no new dependency for it.

use std::io::{self, Write};

use super::{walk, EntityNode, ExportCounts, FactEdge, NodeId, PassageNode, Sink, SynonymEdge};
use crate::corpus::{Passage, PassageIdx};
use crate::graph::EntityGraph;

/// The attributes, declared once before the graph: (id, for, name, type). Edge keys have
/// ids of their own where a node key has the same name.
const KEYS: [(&str, &str, &str, &str); 12] = [
    ("kind", "node", "kind", "string"),
    ("name", "node", "name", "string"),
    ("key", "node", "key", "string"),
    ("passage_count", "node", "passage_count", "int"),
    ("passage", "node", "passage", "string"),
    ("title", "node", "title", "string"),
    ("doc", "node", "doc", "string"),
    ("edge_kind", "edge", "kind", "string"),
    ("relation", "edge", "relation", "string"),
    ("fact", "edge", "fact", "int"),
    ("passages", "edge", "passages", "string"),
    ("weight", "edge", "weight", "double"),
];

pub(super) fn write(graph: &EntityGraph, passages: &[Passage], out: &mut dyn Write) -> io::Result<ExportCounts> {
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<graphml xmlns="http://graphml.graphdrawing.org/xmlns" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">"#
    )?;
    for (id, domain, name, kind) in KEYS {
        writeln!(out, r#"  <key id="{id}" for="{domain}" attr.name="{name}" attr.type="{kind}"/>"#)?;
    }
    // Directed: facts go from subject to object, passage links from passage to entity;
    // a synonym link goes from the lower entity number to the higher.
    writeln!(out, r#"  <graph id="hoprag" edgedefault="directed">"#)?;
    let counts = walk(graph, passages, &mut GraphMlSink { out, list: String::new() })?;
    writeln!(out, "  </graph>\n</graphml>")?;
    Ok(counts)
}

struct GraphMlSink<'w> {
    out: &'w mut dyn Write,
    /// A fact's passage ids as a JSON array, reused from edge to edge.
    list: String,
}

impl GraphMlSink<'_> {
    fn data(&mut self, key: &str, value: &str) -> io::Result<()> {
        write!(self.out, r#"<data key="{key}">"#)?;
        write_xml_text(self.out, value)?;
        write!(self.out, "</data>")
    }
}

impl Sink for GraphMlSink<'_> {
    fn entity(&mut self, node: &EntityNode) -> io::Result<()> {
        write!(self.out, r#"    <node id="{}"><data key="kind">entity</data>"#, NodeId::Entity(node.id))?;
        self.data("name", node.name)?;
        self.data("key", node.key)?;
        writeln!(self.out, r#"<data key="passage_count">{}</data></node>"#, node.passage_count)
    }

    fn passage(&mut self, node: &PassageNode) -> io::Result<()> {
        write!(self.out, r#"    <node id="{}"><data key="kind">passage</data>"#, NodeId::Passage(node.idx))?;
        self.data("passage", &node.passage.id)?;
        self.data("title", &node.passage.title)?;
        self.data("doc", node.passage.document())?;
        writeln!(self.out, "</node>")
    }

    fn fact(&mut self, edge: &FactEdge) -> io::Result<()> {
        let (source, target) = (NodeId::Entity(edge.subject), NodeId::Entity(edge.object));
        write!(self.out, r#"    <edge source="{source}" target="{target}"><data key="edge_kind">fact</data>"#)?;
        self.data("relation", edge.relation)?;
        write!(self.out, r#"<data key="fact">{}</data>"#, edge.fact)?;
        self.list.clear();
        json_list(&mut self.list, edge.passage_ids());
        let list = std::mem::take(&mut self.list);
        self.data("passages", &list)?;
        self.list = list;
        writeln!(self.out, r#"<data key="weight">{}</data></edge>"#, edge.stating.len())
    }

    fn synonym(&mut self, edge: &SynonymEdge) -> io::Result<()> {
        let (source, target) = (NodeId::Entity(edge.a), NodeId::Entity(edge.b));
        writeln!(
            self.out,
            r#"    <edge source="{source}" target="{target}"><data key="edge_kind">synonym</data><data key="weight">{}</data></edge>"#,
            edge.similarity
        )
    }

    fn passage_entity(&mut self, passage: PassageIdx, entity: u32) -> io::Result<()> {
        let (source, target) = (NodeId::Passage(passage), NodeId::Entity(entity));
        writeln!(
            self.out,
            r#"    <edge source="{source}" target="{target}"><data key="edge_kind">passage_entity</data></edge>"#
        )
    }
}

/// Appends `items` to `out` as a JSON array of strings (CSV and GraphML have no list type).
pub(super) fn json_list<'a>(out: &mut String, items: impl Iterator<Item = &'a str>) {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::from(item).to_string());
    }
    out.push(']');
}

/// Whether XML 1.0 allows `c` in a document (its `Char` production); Rust's `char`
/// already excludes the surrogates.
pub fn xml_allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Writes `text` escaped for XML content and attribute values, dropping the characters
/// XML 1.0 forbids (control characters, U+FFFE, U+FFFF): no parser accepts them even as
/// character references. A carriage return is written as a reference, which parsers keep
/// (a literal one they turn into a line feed). Runs of plain characters are written at once.
pub fn write_xml_text(out: &mut dyn Write, text: &str) -> io::Result<()> {
    let mut plain = 0;
    for (i, c) in text.char_indices() {
        let replacement = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&apos;",
            '\r' => "&#xD;",
            c if !xml_allowed(c) => "",
            _ => continue,
        };
        out.write_all(&text.as_bytes()[plain..i])?;
        out.write_all(replacement.as_bytes())?;
        plain = i + c.len_utf8();
    }
    out.write_all(&text.as_bytes()[plain..])
}
