//! A passage's vector is a function of its text alone: the same bits whether it is
//! embedded in one call with many texts, alone, or in small calls, and on one thread or
//! several. An index edited passage by passage then holds the vectors of one built at once.
//!
//! Its own test binary: it sets the process's thread count ([`hoprag::threads::set`]).

use std::path::PathBuf;

use hoprag::embed::{models, Embedder, GemmaEmbedder, GemmaOptions, LocalEmbedder, LocalModel, TextKind};

/// What an index embeds as passages: titles, entity labels, fact texts and passages,
/// short and long (the last past MiniLM's 256 tokens), so that a call's texts are split
/// into sub-batches of every size.
fn texts() -> Vec<String> {
    let passage = "Jeffrey Thomas Porcaro (April 1, 1954 – August 5, 1992) was an American drummer, \
                   songwriter, and record producer, best known for his work with the rock band Toto.";
    let mut texts: Vec<String> = [
        "Toto",
        "Jeff Porcaro",
        "1954",
        "Jeff Porcaro | member of | Toto",
        "Steely Dan | released | Katy Lied",
        "Katy Lied",
        "",
        "Katy Lied\nKaty Lied is the fourth studio album by Steely Dan, released in 1975.",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    texts.push(format!("Jeff Porcaro\n{passage}"));
    texts.push(format!("Toto (band)\n{}", "Toto is an American rock band formed in 1977 in Los Angeles. ".repeat(3)));
    texts.push(format!("Session musicians\n{}", passage.repeat(8)));
    texts
}

/// The model's folder, or `None` (with a message) where it is not installed; in CI, which
/// installs every model the tests use, a missing model fails the test.
fn installed(id: &str) -> Option<PathBuf> {
    match models::require(id) {
        Ok(dir) => Some(dir),
        Err(e) if std::env::var_os("CI").is_some() || std::env::var_os("HOPRAG_REQUIRE_MODELS").is_some() => {
            panic!("the tests install {id}: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// Embeds `texts` as passages with a fresh embedder (from `load`) on each thread count,
/// in one call and in calls of each size in `calls`, and checks every vector has the bits
/// of the first one-call embedding.
fn check(name: &str, threads: &[usize], calls: &[usize], load: impl Fn() -> Box<dyn Embedder>) {
    let texts = texts();
    let bits = |vectors: &[Vec<f32>]| -> Vec<Vec<u32>> {
        vectors.iter().map(|v| v.iter().map(|x| x.to_bits()).collect()).collect()
    };
    let mut reference: Option<Vec<Vec<u32>>> = None;
    for &n in threads {
        hoprag::threads::set(n);
        let embedder = load();
        let whole = bits(&embedder.embed(&texts, TextKind::Passage).unwrap());
        assert_eq!(whole.len(), texts.len());
        let reference = reference.get_or_insert_with(|| whole.clone());
        for (i, (got, want)) in whole.iter().zip(reference.iter()).enumerate() {
            assert!(got == want, "{name}: text {i} ({:?}) on {n} threads differs from on {}", texts[i], threads[0]);
        }
        for &size in calls {
            let mut split = Vec::new();
            for chunk in texts.chunks(size) {
                split.extend(bits(&embedder.embed(chunk, TextKind::Passage).unwrap()));
            }
            for (i, (got, want)) in split.iter().zip(reference.iter()).enumerate() {
                assert!(got == want, "{name}: text {i} ({:?}) in calls of {size} on {n} threads", texts[i]);
            }
        }
    }
}

#[test]
fn passage_vectors_do_not_depend_on_batching_or_threads() {
    // The larger models run fewer rounds (each loads the model again): they share
    // MiniLM's kernels and batching; EmbeddingGemma adds its pooled dense layers (a row
    // per text: one row for a text alone).
    if let Some(dir) = installed(LocalModel::MiniLm.id()) {
        let load = || -> Box<dyn Embedder> { Box::new(LocalEmbedder::load(LocalModel::MiniLm, &dir).unwrap()) };
        check("minilm", &[2, 1, 3], &[1, 4], load);
    }
    if let Some(dir) = installed(LocalModel::MpNet.id()) {
        let load = || -> Box<dyn Embedder> { Box::new(LocalEmbedder::load(LocalModel::MpNet, &dir).unwrap()) };
        check("mpnet", &[2, 1], &[1], load);
    }
    if let Some(dir) = installed("embeddinggemma") {
        let load = || -> Box<dyn Embedder> { Box::new(GemmaEmbedder::load(&dir, GemmaOptions::default()).unwrap()) };
        check("embeddinggemma", &[2], &[1], load);
    }
}
