//! The in-process MiniLM embedder against vectors from an independent implementation.

mod common;

use hoprag::embed::{models, Embedder, MiniLm, TextKind};

#[test]
fn matches_reference_vectors() {
    let Some(data) = common::shared_data() else { return };
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("minilm-reference.json")).unwrap()).unwrap();
    let dir = models::require("minilm").expect("the default embedder is installed by scripts/test.sh");
    let model = MiniLm::load(&dir).unwrap();
    assert_eq!(model.dim(), 384);
    let items = reference["items"].as_array().unwrap();
    assert_eq!(items.len(), 6);
    let texts: Vec<String> = items.iter().map(|i| i["text"].as_str().unwrap().to_string()).collect();
    // One batch, so padding to the longest text is exercised against unpadded references.
    let vectors = model.embed(&texts, TextKind::Passage).unwrap();
    for (item, v) in items.iter().zip(&vectors) {
        let r: Vec<f32> = item["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let norm_r = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        let cos = hoprag::embed::dot(v, &r) / norm_r;
        assert!(cos >= 0.999, "cosine {cos} for {:?}", item["text"]);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
    // Each text alone gives the same vector as in the batch.
    let single = model.embed_one(&texts[0], TextKind::Query).unwrap();
    assert!(hoprag::embed::dot(&single, &vectors[0]) > 0.9999);
}

#[test]
fn missing_model_folder_says_how_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let err = MiniLm::load(dir.path()).err().expect("no model files here").to_string();
    assert!(err.contains("hoprag models fetch minilm"), "{err}");
}

#[test]
fn token_counts_include_the_special_tokens() {
    let dir = models::require("minilm").expect("the default embedder is installed by scripts/test.sh");
    let model = MiniLm::load(&dir).unwrap();
    let texts = vec!["hello world".to_string(), "".to_string(), "Hello, world!".to_string()];
    // [CLS] hello world [SEP]; [CLS] [SEP]; [CLS] hello , world ! [SEP]. Counted by
    // encoding length, so this also fails if the tokenizer pads again (its file pads
    // every text to 128, which made short texts cost 128 tokens each to embed).
    assert_eq!(model.token_counts(&texts).unwrap(), [4, 2, 6]);
    // Padding is the batch's business, not the tokenizer's (its file pads to 128).
    let long: Vec<String> = vec!["word ".repeat(300)];
    assert_eq!(model.token_counts(&long).unwrap(), [MiniLm::MAX_TOKENS], "truncated at 256");
}
