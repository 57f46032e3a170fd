use super::*;
use crate::graph::{Extraction, GraphOptions, Name, Triple};
use std::fs;
use std::io::Write;

#[test]
fn xml_text_is_escaped_and_forbidden_characters_are_dropped() {
    let mut out = Vec::new();
    write_xml_text(&mut out, "a<b & \"c\" 'd'>\u{0}\u{1}\u{1F}\u{FFFE}\u{FFFF}x\r\n\té😀").unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;x&#xD;\n\té😀");
    assert!(xml_allowed('\u{D7FF}') && xml_allowed('\u{E000}') && xml_allowed('\u{10FFFF}'));
    assert!(!xml_allowed('\u{8}') && !xml_allowed('\u{FFFE}'));
}

#[test]
fn csv_fields_are_quoted_only_when_needed() {
    let field = |s: &str| {
        let mut out = Vec::new();
        csv::write_field(&mut out, s).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(field("plain"), "plain");
    assert_eq!(field("a,b"), "\"a,b\"");
    assert_eq!(field("say \"hi\"\nnow"), "\"say \"\"hi\"\"\nnow\"");
}

/// Vectors from a label's first letter: "Bob" and "Bobby" are synonyms, nothing else is.
struct FirstLetter;

impl crate::embed::Embedder for FirstLetter {
    fn id(&self) -> &str {
        "first-letter"
    }
    fn dim(&self) -> usize {
        26
    }
    fn embed(&self, texts: &[String], _: crate::embed::TextKind) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0; 26];
                let first = t.to_ascii_lowercase().bytes().find(u8::is_ascii_lowercase).unwrap_or(b'z');
                v[(first - b'a') as usize] = 1.0;
                v
            })
            .collect())
    }
}

/// Four passages: a fact stated twice, a fact whose ends are one entity, one with an end
/// that is no entity, a mention in no triple, a synonym pair and a passage with nothing.
fn small_graph() -> (EntityGraph, Vec<Passage>) {
    let triple = |passage, s: &str, p: &str, o: &str| Triple {
        passage,
        subject: Name::new(s),
        predicate: Name::new(p),
        object: Name::new(o),
    };
    let mut extraction = Extraction::new(4);
    extraction.triples = vec![
        triple(0, "Alice", "born in", "Paris"),
        triple(0, "Alice", "knows", "Bob"),
        triple(1, "Alice", "born in", "Paris"),
        triple(1, "Paris", "is", "paris"),
        triple(1, "...", "likes", "Bob"),
        triple(2, "Bobby", "likes", "Paris"),
        triple(2, "Bob", "met", "Alice"),
    ];
    extraction.entities[2] = vec![Name::new("Carol")];
    let options = GraphOptions::default();
    let graph =
        EntityGraph::build(&vec![Passage::default(); 4], extraction, &FirstLetter, &options, &crate::progress::Silent)
            .unwrap();
    let mut passages: Vec<Passage> = (0..4).map(|i| Passage::new(format!("p-{i}"), format!("Title {i}"), "")).collect();
    passages[1].title = "Tom & <Jerry>\u{1}".into();
    passages[2].id = "doc,2".into();
    passages[3].doc = Some("book \"3\"".into());
    (graph, passages)
}

#[test]
fn the_export_counts_what_the_graph_reports() {
    let (graph, passages) = small_graph();
    let s = &graph.stats;
    assert_eq!((s.synonym_edges, s.facts, s.relation_edges), (1, 6, 3), "{s:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut every = Vec::new();
    for format in [Format::GraphMl, Format::Jsonl, Format::Csv] {
        let counts = export(&graph, &passages, format, &dir.path().join(format!("{format:?}"))).unwrap();
        assert_eq!(counts.entity_nodes, s.entities);
        assert_eq!(counts.passage_nodes, s.passages);
        assert_eq!(counts.passage_entity_edges, s.passage_entity_edges);
        assert_eq!(counts.synonym_edges, s.synonym_edges);
        assert_eq!(counts.fact_pairs, s.relation_edges);
        // "Paris is paris" and "... likes Bob" have no two entities: no edge.
        assert_eq!((counts.fact_edges, counts.facts_without_edge), (4, 2));
        assert_eq!(counts.fact_edges + counts.facts_without_edge, s.facts);
        every.push(counts);
    }
    assert!(every.iter().all(|c| *c == every[0]));
    let counts = every[0];

    let graphml = fs::read_to_string(dir.path().join("GraphMl")).unwrap();
    assert_eq!(graphml.matches("<node ").count(), counts.nodes());
    assert_eq!(graphml.matches("<edge ").count(), counts.edges());
    assert!(graphml.contains("<data key=\"title\">Tom &amp; &lt;Jerry&gt;</data>"), "{graphml}");
    assert!(graphml.contains("<data key=\"passages\">[&quot;p-0&quot;,&quot;p-1&quot;]</data>"), "{graphml}");
    assert!(graphml.trim_end().ends_with("</graphml>"));

    let jsonl = fs::read_to_string(dir.path().join("Jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.iter().filter(|l| l["type"] == "node").count(), counts.nodes());
    assert_eq!(lines.iter().filter(|l| l["type"] == "edge").count(), counts.edges());
    let born = lines.iter().find(|l| l["relation"] == "born in").unwrap();
    assert_eq!(born["passages"], serde_json::json!(["p-0", "p-1"]));
    assert_eq!(born["kind"], "fact");

    let csv_lines = |name: &str| fs::read_to_string(dir.path().join("Csv").join(name)).unwrap().lines().count() - 1;
    assert_eq!(csv_lines("entity_nodes.csv"), counts.entity_nodes);
    assert_eq!(csv_lines("passage_nodes.csv"), counts.passage_nodes);
    assert_eq!(csv_lines("fact_edges.csv"), counts.fact_edges);
    assert_eq!(csv_lines("synonym_edges.csv"), counts.synonym_edges);
    assert_eq!(csv_lines("passage_entity_edges.csv"), counts.passage_entity_edges);
    let passage_nodes = fs::read_to_string(dir.path().join("Csv/passage_nodes.csv")).unwrap();
    assert!(passage_nodes.contains("p2,\"doc,2\",Title 2,\"doc,2\"\n"), "{passage_nodes}");
    assert!(passage_nodes.contains("p3,p-3,Title 3,\"book \"\"3\"\"\"\n"), "{passage_nodes}");
    // Only the finished files are left: no temporaries.
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn an_export_replaces_the_file_whole() {
    let (graph, passages) = small_graph();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("graph.graphml");
    fs::write(&out, "old").unwrap();
    // A walk that fails half-way leaves the old file and no temporary.
    let mut output = Output::create(&out).unwrap();
    output.writer().write_all(b"half").unwrap();
    drop(output);
    assert_eq!(fs::read_to_string(&out).unwrap(), "old");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    export(&graph, &passages, Format::GraphMl, &out).unwrap();
    assert!(fs::read_to_string(&out).unwrap().starts_with("<?xml"));
}

#[cfg(unix)]
#[test]
fn an_export_has_the_permissions_of_an_ordinary_file() {
    use std::os::unix::fs::PermissionsExt;
    let (graph, passages) = small_graph();
    let dir = tempfile::tempdir().unwrap();
    let (out, ordinary) = (dir.path().join("graph.jsonl"), dir.path().join("ordinary"));
    export(&graph, &passages, Format::Jsonl, &out).unwrap();
    fs::write(&ordinary, "").unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), mode(&ordinary));
}
