//! The in-process sentence encoders against vectors from independent implementations:
//! MiniLM against `../shared/data/minilm-reference.json`, MPNet against
//! `tests/data/mpnet-reference.json` (sentence-transformers; see
//! `scripts/reference_vectors.py` for how it was made).

mod common;

use std::path::{Path, PathBuf};

use hoprag::embed::{models, Embedder, LocalEmbedder, LocalModel, TextKind};

/// The installed model, or `None` (with a message) where it is not installed; in CI,
/// which installs every model the tests use, a missing model fails the test.
fn installed(model: LocalModel) -> Option<PathBuf> {
    match models::require(model.id()) {
        Ok(dir) => Some(dir),
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI installs {}: {e}", model.id()),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn check_reference(model: LocalModel, reference: &Path) {
    let Some(dir) = installed(model) else { return };
    let reference: serde_json::Value = serde_json::from_slice(&std::fs::read(reference).unwrap()).unwrap();
    let embedder = LocalEmbedder::load(model, &dir).unwrap();
    let items = reference["items"].as_array().unwrap();
    assert_eq!(items.len(), 6);
    let texts: Vec<String> = items.iter().map(|i| i["text"].as_str().unwrap().to_string()).collect();
    // One batch: the texts are packed together, which must not change any vector.
    let vectors = embedder.embed(&texts, TextKind::Passage).unwrap();
    for (item, v) in items.iter().zip(&vectors) {
        let r: Vec<f32> = item["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        assert_eq!(v.len(), r.len());
        let norm_r = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        let cos = hoprag::embed::dot(v, &r) / norm_r;
        assert!(cos >= 0.999, "{}: cosine {cos} for {:?}", model.id(), item["text"]);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
    // Each text alone gives the same vector as in the batch.
    for (text, v) in texts.iter().zip(&vectors) {
        let single = embedder.embed_one(text, TextKind::Query).unwrap();
        assert!(hoprag::embed::dot(&single, v) > 0.9999, "{}: {text:?} alone", model.id());
    }
}

#[test]
fn minilm_matches_reference_vectors() {
    let Some(data) = common::shared_data() else { return };
    check_reference(LocalModel::MiniLm, &data.join("minilm-reference.json"));
}

#[test]
fn mpnet_matches_reference_vectors() {
    check_reference(LocalModel::MpNet, &common::repo_root().join("crates/hoprag/tests/data/mpnet-reference.json"));
}

#[test]
fn large_batches_split_across_forward_passes_keep_every_vector() {
    let Some(dir) = installed(LocalModel::MiniLm) else { return };
    let embedder = LocalEmbedder::load(LocalModel::MiniLm, &dir).unwrap();
    // ~300 texts of up to 256 tokens: more tokens than one forward pass takes, so the
    // batch is split; every text must get the vector it gets alone.
    let texts: Vec<String> =
        (0..300).map(|i| format!("passage {i} about {}", "the history of the river valley ".repeat(i % 40))).collect();
    let batch = embedder.embed(&texts, TextKind::Passage).unwrap();
    assert_eq!(batch.len(), texts.len());
    for i in [0, 1, 77, 150, 299] {
        let alone = embedder.embed_one(&texts[i], TextKind::Passage).unwrap();
        assert!(hoprag::embed::dot(&alone, &batch[i]) > 0.9999, "text {i}");
    }
    assert!(hoprag::embed::dot(&batch[1], &batch[2]) < 0.9999, "different texts, different vectors");
}

#[test]
fn missing_model_folder_says_how_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let err = LocalEmbedder::load(LocalModel::MiniLm, dir.path()).err().expect("no model files here").to_string();
    assert!(err.contains("hoprag models fetch minilm"), "{err}");
}

#[test]
fn token_counts_include_the_special_tokens() {
    let Some(dir) = installed(LocalModel::MiniLm) else { return };
    let model = LocalEmbedder::load(LocalModel::MiniLm, &dir).unwrap();
    let texts = vec!["hello world".to_string(), "".to_string(), "Hello, world!".to_string()];
    // [CLS] hello world [SEP]; [CLS] [SEP]; [CLS] hello , world ! [SEP]. Counted by
    // encoding length, so this also fails if the tokenizer pads again (its file pads
    // every text to 128).
    assert_eq!(model.token_counts(&texts).unwrap(), [4, 2, 6]);
    let long: Vec<String> = vec!["word ".repeat(300)];
    assert_eq!(model.token_counts(&long).unwrap(), [LocalModel::MiniLm.max_tokens()], "truncated at 256");
}

#[test]
fn spans_are_pooled_from_their_texts_pass() {
    let Some(dir) = installed(LocalModel::MiniLm) else { return };
    let model = LocalEmbedder::load(LocalModel::MiniLm, &dir).unwrap();
    let texts = vec![
        "Paris is the capital of France.".to_string(),
        "Paris Hilton is an American media personality.".to_string(),
        format!("{} Paris", "word ".repeat(300)),
    ];
    let paris = 0..5;
    let spans = vec![vec![paris.clone(), 0..3, 16..30, 9..9], vec![paris.clone()], vec![1500..1505, 0..4]];
    let read = model.embed_spans(&texts, &spans).expect("a local model reads spans").unwrap();
    // Each text's own vector, to the bit, beside its spans'.
    let whole = model.embed(&texts, TextKind::Passage).unwrap();
    assert!(read.iter().zip(&whole).all(|(r, w)| r.vector == *w));
    let v: Vec<Vec<Option<Vec<f32>>>> = read.into_iter().map(|r| r.spans).collect();
    assert_eq!(v.iter().map(Vec::len).collect::<Vec<_>>(), [4, 1, 2]);
    let unit = |v: &[f32]| (v.iter().map(|x| x * x).sum::<f32>().sqrt() - 1.0).abs() < 1e-4;
    let (a, b) = (v[0][0].as_ref().unwrap(), v[1][0].as_ref().unwrap());
    assert!(unit(a) && unit(b));
    assert_eq!(v[0][1].as_ref(), Some(a), "a span inside one token pools that token");
    assert!(hoprag::embed::dot(a, b) < 0.99, "the same word read in two contexts: {}", hoprag::embed::dot(a, b));
    assert!(v[0][3].is_none(), "an empty span has no vector");
    assert!(v[2][0].is_none(), "past the 256 tokens read, no vector");
    assert!(v[2][1].is_some());
    // Packed with other texts or alone, a text's spans are the same.
    let alone = model.embed_spans(&texts[1..2], &spans[1..2]).unwrap().unwrap();
    assert!(hoprag::embed::dot(alone[0].spans[0].as_ref().unwrap(), b) > 0.9999);
}

/// EmbeddingGemma against sentence-transformers' vectors of the same texts, prompts and
/// settings (`tests/data/embeddinggemma-reference.json`, made by
/// `scripts/embeddinggemma_reference.py`): the prompted texts and their token ids must be
/// the same, and every vector within cosine 0.999, queries and passages, titled and not,
/// one of them past the sliding window.
#[test]
fn embeddinggemma_matches_reference_vectors() {
    use hoprag::embed::{GemmaEmbedder, GemmaOptions};
    let dir = match models::require("embeddinggemma") {
        Ok(dir) => dir,
        Err(e) if std::env::var_os("HOPRAG_REQUIRE_MODELS").is_some() || std::env::var_os("CI").is_some() => {
            panic!("scripts/test.sh installs embeddinggemma: {e}")
        }
        Err(e) => {
            eprintln!("skipped: the EmbeddingGemma reference test needs the model (1.1 GB): {e}");
            return;
        }
    };
    let path = common::repo_root().join("crates/hoprag/tests/data/embeddinggemma-reference.json");
    let reference: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let items = reference["items"].as_array().unwrap();
    assert_eq!(items.len(), 14);
    let mut checked = 0;
    let mut worst = 1.0f32;
    for setting in ["query=qa", "query=retrieval", "title=passage", "title=none"] {
        let options: GemmaOptions = match format!("embeddinggemma:{setting}").parse().unwrap() {
            hoprag::embed::EmbedderSpec::Gemma(o) => o,
            other => panic!("{other:?}"),
        };
        let embedder = GemmaEmbedder::load(&dir, options).unwrap();
        let mine: Vec<&serde_json::Value> = items.iter().filter(|i| i["setting"] == setting).collect();
        let kind = if mine[0]["kind"] == "query" { TextKind::Query } else { TextKind::Passage };
        let texts: Vec<String> = mine.iter().map(|i| i["text"].as_str().unwrap().to_string()).collect();
        // One batch: the texts are packed together, which must not change any vector.
        let vectors = embedder.embed(&texts, kind).unwrap();
        for (item, v) in mine.iter().zip(&vectors) {
            let text = item["text"].as_str().unwrap();
            assert_eq!(embedder.prompted(text, kind), item["prompted"].as_str().unwrap());
            let r: Vec<f32> = item["vector"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            assert_eq!(v.len(), r.len());
            let cos = hoprag::embed::dot(v, &r) / r.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!(cos >= 0.999, "{setting}: cosine {cos} for {text:?}");
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4);
            checked += 1;
            worst = worst.min(cos);
        }
        // Token ids as sentence-transformers' tokenizer gives them (<bos> … <eos>).
        let ids = embedder.token_ids(&texts, kind).unwrap();
        for (item, ids) in mine.iter().zip(&ids) {
            let want: Vec<u32> =
                item["token_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
            assert_eq!(ids, &want, "{setting}: token ids of {:?}", item["text"]);
        }
        // Each text alone gives the same vector as in the batch.
        let alone = embedder.embed_one(&texts[0], kind).unwrap();
        assert!(hoprag::embed::dot(&alone, &vectors[0]) > 0.9999, "{setting}: alone vs batch");
    }
    assert_eq!(checked, items.len());
    eprintln!("embeddinggemma: {checked} vectors, lowest cosine to sentence-transformers {worst}");
}
