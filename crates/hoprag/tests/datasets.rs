//! Dataset formats on small hand-written files (the real files are in shared_data.rs).

use std::io::Write;

use hoprag::corpus::Passage;
use hoprag::dataset::{load_dataset, resolve_gold, DatasetFormat};

fn file(content: &str, ext: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(ext).tempfile().unwrap();
    f.write_all(content.as_bytes()).unwrap();
    f
}

fn p(id: &str, title: &str, text: &str) -> Passage {
    Passage::new(id, title, text)
}

#[test]
fn twowiki_raw_format() {
    let f = file(
        r#"[{"_id": "abc", "type": "compositional", "question": "Who is the father of the director of X?",
            "answer": "Z", "supporting_facts": [["X", 0], ["Y", 1], ["X", 2]],
            "evidences": [["X", "director", "Y"], ["Y", "father", "Z"]],
            "context": [["X", ["X is a film", " by Y."]], ["Y", ["Y is a director."]]]}]"#,
        ".json",
    );
    let (format, qs) = load_dataset(f.path()).unwrap();
    assert_eq!(format, DatasetFormat::TwoWiki);
    assert_eq!(qs[0].gold.len(), 2, "distinct titles");
    assert_eq!(qs[0].qtype.as_deref(), Some("compositional"));
    assert_eq!(qs[0].answers, vec!["Z"]);
    let r = resolve_gold(&qs, &[p("1", "Y", "Y is a director."), p("2", "X", "X is a film by Y.")]);
    assert_eq!(r.questions[0].gold, vec![1, 0]);
}

#[test]
fn jsonl_with_titles_or_ids_and_hop_order() {
    let f = file(
        "{\"id\": \"q1\", \"question\": \"a?\", \"gold_titles\": [\"B\", \"A\"], \"type\": \"bridge\", \"hop_ordered\": true}\n\
         {\"id\": 2, \"question\": \"b?\", \"gold_ids\": [\"p1\", \"missing\"]}\n",
        ".jsonl",
    );
    let (format, qs) = load_dataset(f.path()).unwrap();
    assert_eq!(format, DatasetFormat::Jsonl);
    let r = resolve_gold(&qs, &[p("p1", "A", "a"), p("p2", "B", "b")]);
    assert_eq!(r.questions[0].gold, vec![1, 0]);
    assert_eq!(r.questions[0].last_hop, Some(0));
    assert_eq!(r.questions[1].id, "2");
    assert_eq!(r.questions[1].gold, vec![0]);
    assert_eq!(r.questions[1].gold_total, 2);
    // Without `hop_ordered` a gold list is a set: no last hop.
    assert!(!r.questions[1].hop_ordered && r.questions[1].last_hop.is_none());
    assert_eq!(r.unmatched.len(), 1);
    assert_eq!(r.unmatched[0].question_id, "2");
}

#[test]
fn malformed_datasets_name_the_entry() {
    let f = file("{\"id\": \"q1\", \"question\": \"a?\"}\n", ".jsonl");
    let err = load_dataset(f.path()).unwrap_err().to_string();
    assert!(err.contains("line 1") && err.contains("gold_titles"), "{err}");
    let f = file(r#"[{"_id": "x", "question": "q", "supporting_facts": [[1, 0]]}]"#, ".json");
    let err = load_dataset(f.path()).unwrap_err().to_string();
    assert!(err.contains("question [0]") && err.contains("supporting_facts[0]"), "{err}");
    let f = file("[{\"foo\": 1}]", ".json");
    assert!(load_dataset(f.path()).unwrap_err().to_string().contains("unknown dataset format"));
}

#[test]
fn musique_without_known_last_hop() {
    let f = file(
        r#"[{"id": "3hop1__1_2_3", "question": "q?", "paragraphs": [
              {"idx": 0, "title": "A", "paragraph_text": "a", "is_supporting": true},
              {"idx": 1, "title": "B", "paragraph_text": "b", "is_supporting": true},
              {"idx": 2, "title": "C", "paragraph_text": "c", "is_supporting": false}],
            "question_decomposition": [{"paragraph_support_idx": 1}, {"paragraph_support_idx": null}]}]"#,
        ".json",
    );
    let (_, qs) = load_dataset(f.path()).unwrap();
    assert_eq!(qs[0].qtype.as_deref(), Some("3hop"));
    assert!(!qs[0].hop_ordered);
    let r = resolve_gold(&qs, &[p("a", "A", "a"), p("b", "B", "b")]);
    assert_eq!(r.questions[0].gold, vec![1, 0], "known hops first");
    assert_eq!(r.questions[0].last_hop, None);
}
