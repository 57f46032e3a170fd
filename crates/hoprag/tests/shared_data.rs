//! Loaders on the real benchmark files in ../shared/data.

mod common;

use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::dataset::{load_dataset, resolve_gold, DatasetFormat};

#[test]
fn musique_corpus_and_questions() {
    let Some(data) = common::shared_data() else { return };
    let corpus = load_corpus(&data.join("musique-train/corpus.json"), &CorpusOptions::default()).unwrap();
    assert_eq!(corpus.report.entries, 1890);
    assert!(corpus.report.skipped.is_empty());
    assert_eq!(corpus.passages.len() + corpus.report.duplicates.len(), 1890);
    let (format, questions) = load_dataset(&data.join("musique-train/questions.json")).unwrap();
    assert_eq!(format, DatasetFormat::Musique);
    assert_eq!(questions.len(), 51);
    let resolved = resolve_gold(&questions, &corpus.passages);
    eprintln!("musique-train gold matching: {:?}", resolved.counts);
    assert!(resolved.unmatched.is_empty(), "{:?}", resolved.unmatched);
    assert!(resolved.fallback.is_empty(), "{:?}", resolved.fallback);
    // 119 supporting paragraphs, all matched on title + text (titles repeat, so a title
    // alone would not do); every question's decomposition ends on a supporting
    // paragraph in this subset (none has a null last `paragraph_support_idx`).
    let c = resolved.counts;
    assert_eq!((c.gold, c.by_title_and_text, c.by_text_only, c.by_title_only, c.unmatched), (119, 119, 0, 0, 0));
    assert_eq!((c.hop_ordered_questions, c.last_hop_matched), (51, 51));
    let q0 = &resolved.questions[0];
    assert_eq!(q0.id, "2hop__205146_62031");
    assert_eq!(q0.qtype.as_deref(), Some("2hop"));
    // Hop order from the decomposition: Bubye River first, the waterfall last.
    let titles: Vec<&str> = q0.gold.iter().map(|&g| corpus.passages[g as usize].title.as_str()).collect();
    assert_eq!(titles[0], "Bubye River");
    assert_eq!(q0.last_hop, q0.gold.last().copied());
    assert!(resolved.questions.iter().any(|q| q.qtype.as_deref() == Some("3hop")));
    assert!(resolved.questions.iter().all(|q| q.gold_total >= 2));
}

#[test]
fn hotpotqa_corpus_and_questions() {
    let Some(data) = common::shared_data() else { return };
    let corpus = load_corpus(&data.join("hotpotqa-train/corpus.json"), &CorpusOptions::default()).unwrap();
    assert_eq!(corpus.report.entries, 994);
    assert_eq!(corpus.passages.len(), 994);
    assert!(!corpus.passages[0].text.contains("  "), "sentences joined with single spaces");
    let (format, questions) = load_dataset(&data.join("hotpotqa-train/questions.json")).unwrap();
    assert_eq!(format, DatasetFormat::HotpotQa);
    assert_eq!(questions.len(), 51);
    let resolved = resolve_gold(&questions, &corpus.passages);
    eprintln!("hotpotqa-train gold matching: {:?}", resolved.counts);
    assert!(resolved.unmatched.is_empty(), "{:?}", resolved.unmatched);
    assert!(resolved.fallback.is_empty(), "{:?}", resolved.fallback);
    let c = resolved.counts;
    assert_eq!((c.gold, c.by_title_and_text, c.unmatched), (102, 102, 0));
    // HotpotQA gives no hop order: LastHop is not defined for any question.
    assert_eq!(c.hop_ordered_questions, 0);
    assert!(resolved.questions.iter().all(|q| q.gold.len() == 2 && !q.hop_ordered && q.last_hop.is_none()));
    let types: std::collections::BTreeSet<_> = resolved.questions.iter().filter_map(|q| q.qtype.clone()).collect();
    assert_eq!(types.into_iter().collect::<Vec<_>>(), vec!["bridge", "comparison"]);
}

#[test]
fn twowiki_corpus() {
    let Some(data) = common::shared_data() else { return };
    let corpus = load_corpus(&data.join("2wiki-corpus/corpus.json"), &CorpusOptions::default()).unwrap();
    assert_eq!(corpus.report.entries, 6119);
    assert!(corpus.report.skipped.is_empty());
    assert_eq!(corpus.passages.len() + corpus.report.duplicates.len(), 6119);
}
