//! Graph build, attach, reload and the graph methods end to end on the demo corpus.

mod common;

use std::sync::Arc;

use common::HashEmbedder;
use hoprag::corpus::{load_corpus, CorpusOptions, Passage};
use hoprag::embed::Embedder;
use hoprag::graph::{extract_heuristic, EdgeKind, EntityGraph, GraphOptions};
use hoprag::index::Index;
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::store;
use hoprag::{Config, Engine};

fn demo_index(dir: &std::path::Path) -> Index {
    let corpus = load_corpus(&common::demo().join("corpus.jsonl"), &CorpusOptions::default()).unwrap();
    common::hash_index(dir, &corpus);
    store::folder(dir).load().unwrap()
}

#[test]
fn heuristic_graph_attaches_reloads_and_serves_graph_methods() {
    let dir = tempfile::tempdir().unwrap();
    let index = demo_index(dir.path());
    let extraction = extract_heuristic(index.passages().as_slice());
    assert!(extraction.triples.len() > index.len(), "several triples per passage");
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extraction,
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    let s = graph.stats.clone();
    assert_eq!(s.passages, 60);
    assert!(s.entities > 60 && s.relation_edges > 0);
    assert_eq!(graph.edges.iter().filter(|e| e.kind == EdgeKind::Synonym).count(), s.synonym_edges);
    assert!(graph.edges.iter().all(|e| e.a < e.b), "each undirected edge once");
    assert_eq!(graph.entity_vectors.rows(), s.entities);
    assert_eq!(graph.fact_vectors.rows(), s.facts);
    assert!(s.facts > 0 && s.facts <= s.triples);
    for (t, triple) in graph.triples.iter().enumerate() {
        let first = &graph.triples[graph.fact_triple(graph.fact_of(t as u32)) as usize];
        assert_eq!(first.text(), triple.text(), "a triple and its fact's first triple say the same");
    }
    store::attach_graph(store::folder(dir.path()).as_ref(), &graph, "heuristic".into()).unwrap();

    let index = store::folder(dir.path()).load().unwrap();
    assert_eq!(index.manifest.graph.as_ref().unwrap().source, "heuristic");
    let reloaded = store::folder(dir.path()).load_graph(&index, None).unwrap().unwrap();
    assert_eq!(reloaded.entities, graph.entities);
    assert_eq!(reloaded.entity_vectors.as_flat(), graph.entity_vectors.as_flat());
    assert!(reloaded.entity_id("maud corrigan").is_some());

    let engine =
        Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), Config::default())
            .unwrap();
    // The question names the lighthouse; the graph walks to its builder's passage.
    let q = Query::new("Who founded the company that built Varn Light?");
    let ppr = engine.retriever("ppr").unwrap().retrieve(&q, 10).unwrap();
    let titles: Vec<&str> = ppr.hits.iter().map(|h| engine.index.passage(h.passage).title.as_str()).collect();
    assert!(titles.contains(&"Varn Light"), "{titles:?}");
    assert!(ppr.trace.steps.iter().any(|s| s.name == "link entities"));
    stored_walk_ranks_as_one_solved_at_query_time(dir.path(), &q);
    assert!(ppr.trace.steps.iter().any(|s| s.name == "ppr"));
    let pg = engine.retriever("phasegraph").unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(pg.hits.len(), 5);
    assert!(pg.hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(pg.trace.steps.iter().any(|s| s.name == "calibrated fusion"));

    // `auto` runs its choice for a heuristic graph, with its dense guard, and says so
    // first in its trace.
    let auto = engine.retriever("auto").unwrap().retrieve(&q, 5).unwrap();
    let chosen = engine.config.methods.auto.with_heuristic_graph.clone();
    let mut guarded = engine.config.clone();
    guarded.methods.ppr.dense_guard = guarded.methods.auto.dense_guard;
    let expected = engine.with_config(guarded).retriever(&chosen).unwrap().retrieve(&q, 5).unwrap();
    assert_eq!(auto.hits, expected.hits);
    assert!(auto.trace.steps.iter().any(|s| s.name == "dense guard"), "{:?}", auto.trace.steps);
    assert!(ppr.trace.steps.iter().all(|s| s.name != "dense guard"), "ppr itself runs unguarded");
    assert_eq!(auto.trace.steps[0].name, "auto");
    assert_eq!(auto.trace.steps[0].detail["method"], chosen.as_str());
    assert!(auto.trace.steps[0].detail["because"].as_str().unwrap().contains("heuristic"));
}

fn demo_engine_with_graph(dir: &std::path::Path) -> Engine {
    let index = demo_index(dir);
    let extraction = extract_heuristic(index.passages().as_slice());
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extraction,
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    store::attach_graph(store::folder(dir).as_ref(), &graph, "heuristic".into()).unwrap();
    Engine::new(store::folder(dir), Arc::new(HashEmbedder::new()), Config::default()).unwrap()
}

#[test]
fn phasegraph_is_the_same_method_whatever_k_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine_with_graph(dir.path());
    let pg = engine.retriever("phasegraph").unwrap();
    let n_v = engine.config.methods.phasegraph.n_v;
    for text in ["Who founded the company that built Varn Light?", "Where was the founder of Ardent Ironworks born?"] {
        let q = Query::new(text);
        let at = |k: usize| pg.retrieve(&q, k).unwrap();
        let (five, fifteen) = (at(5), at(15));
        assert_eq!(fifteen.hits.len(), 15);
        // The vector list is N_v long at any k, so the first five do not move.
        assert_eq!(&fifteen.hits[..5], &five.hits[..], "{text}");
        for r in [&five, &fifteen] {
            let fusion = r.trace.steps.iter().find(|s| s.name == "calibrated fusion").unwrap();
            assert_eq!(fusion.detail["vector"], n_v, "{}", fusion.detail);
        }
    }
}

#[test]
fn ppr_returns_k_passages_filled_from_dense_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine_with_graph(dir.path());
    let q = Query::new("Who founded the company that built Varn Light?");
    // Phrase seeds only: the walk reaches only the seeds' part of the graph.
    let ppr = engine.retriever("ppr[passage_node_weight=0]").unwrap();
    let n = engine.index.len();
    let r = ppr.retrieve(&q, n + 10).unwrap();
    assert_eq!(r.hits.len(), n, "every passage, once");
    let mut seen: Vec<_> = r.hits.iter().map(|h| h.passage).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), n);
    assert!(r.hits.windows(2).all(|w| w[0].score >= w[1].score), "scores in rank order");
    assert_eq!(ppr.retrieve(&q, n + 10).unwrap().hits, r.hits, "deterministic");
    // The walk reached some passages; the rest follow in dense order.
    let walked = r.trace.steps.iter().find(|s| s.name == "ppr").unwrap().detail["passages"].as_u64().unwrap() as usize;
    assert!(walked > 0 && walked <= n, "the walk reaches {walked} of {n} passages");
    let dense: Vec<_> =
        engine.retriever("dense").unwrap().retrieve(&q, n).unwrap().hits.iter().map(|h| h.passage).collect();
    let tail: Vec<_> = r.hits[walked..].iter().map(|h| h.passage).collect();
    let dense_order: Vec<_> = dense.iter().copied().filter(|p| tail.contains(p)).collect();
    assert_eq!(tail, dense_order);
}

#[test]
fn ppr_seeds_the_entity_a_question_names_beside_its_facts() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine_with_graph(dir.path());
    let q = Query::new("Which company did Maud Corrigan establish in Dunhaven?");
    let seeds = |spec: &str| {
        let r = engine.retriever(spec).unwrap().retrieve(&q, 5).unwrap();
        let step = r.trace.steps.iter().find(|s| s.name == "link entities").unwrap().detail.clone();
        step.as_array()
            .unwrap()
            .iter()
            .map(|l| (l["label"].as_str().unwrap().to_string(), l["via"].clone()))
            .collect::<Vec<_>>()
    };
    // By default the named entity is linked by its exact name.
    let linked = seeds("ppr");
    assert!(linked.iter().any(|(label, via)| label == "Maud Corrigan" && via == "exact"), "{linked:?}");
    // HippoRAG 2's fact-only seeding links nothing by name.
    let facts_only = seeds("ppr[ppr.link.mentions=false]");
    assert!(facts_only.iter().all(|(_, via)| via == "fact"), "{facts_only:?}");
}

#[test]
fn graph_methods_without_a_graph_say_how_to_build_one() {
    let dir = tempfile::tempdir().unwrap();
    let index = demo_index(dir.path());
    let engine =
        Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), Config::default())
            .unwrap();
    let err = engine.retriever("ppr").err().expect("no graph").to_string();
    assert!(err.contains("hoprag graph"), "{err}");
}

#[test]
fn an_upsert_brings_the_graph_to_what_a_fresh_build_makes() {
    let dir = tempfile::tempdir().unwrap();
    let index = demo_index(dir.path());
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extract_heuristic(index.passages().as_slice()),
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    store::attach_graph(store::folder(dir.path()).as_ref(), &graph, "heuristic".into()).unwrap();
    let embedder: Arc<dyn hoprag::embed::Embedder> = Arc::new(HashEmbedder::new());
    let embedders = store::edit::Embedders { passages: embedder.clone(), graph: embedder };
    let rows = vec![Passage::new("z", "Zephyr Quarry", "Zephyr Quarry supplied granite to Ardent Ironworks.")];
    let request = store::edit::Request::Upsert(rows);
    let options = store::edit::EditOptions::default();
    store::edit::edit(store::folder(dir.path()).as_ref(), &request, &embedders, &options, &Silent).unwrap();
    let index = store::folder(dir.path()).load().unwrap();
    assert_eq!(index.len(), 61);
    assert_eq!(index.manifest.graph.as_ref().unwrap().passages, 61);
    // Written as a delta: its graph is derived from the base's with the graph's embedder.
    assert!(index.manifest.delta.is_some());
    let err = store::folder(dir.path()).load_graph(&index, None).unwrap_err().to_string();
    assert!(err.contains("embedder"), "{err}");
    let edited = store::folder(dir.path()).load_graph(&index, Some(&HashEmbedder::new())).unwrap().unwrap();
    let fresh = EntityGraph::build(
        index.passages().as_slice(),
        extract_heuristic(index.passages().as_slice()),
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    assert_eq!(edited.entities, fresh.entities);
    assert_eq!(edited.labels, fresh.labels);
    assert_eq!(edited.passage_entities, fresh.passage_entities);
    assert_eq!(edited.triples, fresh.triples);
    let edges = |g: &EntityGraph| g.edges.iter().map(|e| (e.a, e.b, e.weight.to_bits(), e.kind)).collect::<Vec<_>>();
    assert_eq!(edges(&edited), edges(&fresh));
    assert_eq!(edited.entity_vectors.to_le_bytes(), fresh.entity_vectors.to_le_bytes());
    assert_eq!(edited.fact_vectors.to_le_bytes(), fresh.fact_vectors.to_le_bytes());
    let z = index.passages().iter().position(|p| p.id == "z").unwrap();
    assert!(!edited.passage_entities[z].is_empty(), "the new passage is in the graph");
    let engine =
        Engine::new(store::folder(index.location().as_ref()), Arc::new(HashEmbedder::new()), Config::default())
            .unwrap();
    let r = engine.retriever("ppr").unwrap().retrieve(&Query::new("Zephyr Quarry"), 5).unwrap();
    assert!(r.hits.iter().any(|h| h.passage as usize == z), "ppr finds the new passage");
}

#[test]
fn a_statement_in_many_passages_is_one_fact_and_graphs_from_before_facts_still_load() {
    let passage = |id: &str, title: &str, text: &str| Passage::new(id, title, text);
    let shared = "Maud Corrigan founded Ardent Ironworks in Dunhaven.";
    let passages = [
        passage("a", "Maud Corrigan", &format!("{shared} She was born in Varn.")),
        passage("b", "Ardent Ironworks", &format!("{shared} It closed in 1947.")),
        passage("c", "Dunhaven", "Dunhaven lies on the Varn estuary."),
    ];
    let extraction = extract_heuristic(&passages);
    let embedder = HashEmbedder::new();
    let graph =
        EntityGraph::build(&vec![Passage::default(); 3], extraction, &embedder, &GraphOptions::default(), &Silent)
            .unwrap();
    let text = |t: usize| graph.triples[t].text();
    let repeated: Vec<(usize, usize)> = (0..graph.triples.len())
        .flat_map(|a| (a + 1..graph.triples.len()).map(move |b| (a, b)))
        .filter(|&(a, b)| text(a) == text(b))
        .collect();
    assert!(!repeated.is_empty(), "the shared sentence gives the same triples in passages a and b");
    for &(a, b) in &repeated {
        assert_ne!(graph.triples[a].passage, graph.triples[b].passage);
        assert_eq!(graph.fact_of(a as u32), graph.fact_of(b as u32), "{} is one fact", text(a));
    }
    assert_eq!(graph.stats.facts, graph.triples.len() - repeated.len());
    assert_eq!(graph.fact_vectors.rows(), graph.stats.facts);
    for t in 0..graph.triples.len() as u32 {
        let v = embedder.embed_one(&graph.triples[t as usize].text(), hoprag::embed::TextKind::Passage).unwrap();
        assert_eq!(graph.triple_vector(t), v.as_slice(), "triple {t} reads its own text's vector");
    }

    // Saved and loaded: the same facts.
    let dir = tempfile::tempdir().unwrap();
    graph.save(dir.path()).unwrap();
    let loaded = EntityGraph::load(dir.path(), embedder.dim()).unwrap();
    assert_eq!(loaded.triple_facts, graph.triple_facts);
    assert_eq!(loaded.fact_vectors.as_flat(), graph.fact_vectors.as_flat());

    // A graph written before facts were shared (and before the binary table and the
    // row lists): graph.json without triple_facts, a vector per triple.
    for name in ["graph.bin", "entities.f32.rows", "triples.f32.rows"] {
        std::fs::remove_file(dir.path().join(name)).unwrap();
    }
    let json = dir.path().join("graph.json");
    let mut value = serde_json::to_value(&graph).unwrap();
    value.as_object_mut().unwrap().remove("triple_facts").expect("facts are saved");
    std::fs::write(&json, serde_json::to_vec(&value).unwrap()).unwrap();
    let per_triple: Vec<f32> = (0..graph.triples.len() as u32).flat_map(|t| graph.triple_vector(t).to_vec()).collect();
    let bytes: Vec<u8> = per_triple.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(dir.path().join("triples.f32"), bytes).unwrap();
    let old = EntityGraph::load(dir.path(), embedder.dim()).unwrap();
    assert_eq!(old.fact_count(), graph.triples.len(), "each triple its own fact");
    for t in 0..graph.triples.len() as u32 {
        assert_eq!(old.triple_vector(t), graph.triple_vector(t));
    }
    // A fact map that names a fact without a vector is refused, naming the file.
    value["triple_facts"] = serde_json::json!(vec![graph.triples.len() as u32; graph.triples.len()]);
    std::fs::write(&json, serde_json::to_vec(&value).unwrap()).unwrap();
    let err = EntityGraph::load(dir.path(), embedder.dim()).expect_err("refused").to_string();
    assert!(err.contains("triples.f32") || err.contains("graph.json"), "{err}");
}

#[test]
fn the_split_walk_ranks_as_the_full_walk_once_prepared() {
    let dir = tempfile::tempdir().unwrap();
    let engine = demo_engine_with_graph(dir.path());
    // The reference: the full walk, run to convergence (not stopped once ranked), so that
    // its scores are the fixed point's.
    let mut config = engine.config.clone();
    config.methods.ppr.ppr.split = false;
    config.methods.ppr.ppr.stop_when_ranked = false;
    config.methods.ppr.ppr.tolerance = 1e-13;
    let full = engine.with_config(config);
    engine.prepare().unwrap();
    let (split, walk) = (engine.retriever("ppr").unwrap(), full.retriever("ppr").unwrap());
    let questions = [
        "Who founded the company that built Varn Light?",
        "Where was the founder of Ardent Ironworks born?",
        "Zephyr Quarry",
        "What river runs past the city where the lighthouse keeper was born?",
    ];
    let mut used = 0;
    for text in questions {
        for k in [3, 10] {
            let q = Query::new(text);
            let (a, b) = (split.retrieve(&q, k).unwrap(), walk.retrieve(&q, k).unwrap());
            let ids = |r: &hoprag::retrieve::Retrieval| r.hits.iter().map(|h| h.passage).collect::<Vec<_>>();
            assert_eq!(ids(&a), ids(&b), "{text} at k = {k}");
            // The split's scores are proven within `bound` of the fixed point (the ranking
            // needs no more), plus the f32 of a hit's score.
            let step = a.trace.steps.iter().find(|s| s.name == "ppr").unwrap();
            if step.detail["split"] == true {
                used += 1;
                let bound = step.detail["bound"].as_f64().unwrap();
                for (x, y) in a.hits.iter().zip(&b.hits) {
                    let (x, y) = (x.score as f64, y.score as f64);
                    assert!((x - y).abs() <= bound + 1e-6 * y.abs(), "{text}: {x} vs {y}, bound {bound}");
                }
            }
            assert!(b.trace.steps.iter().all(|s| s.detail.get("split").is_none()), "split off: the full walk only");
        }
    }
    assert!(used >= questions.len(), "the split walk answered {used} of {} queries", 2 * questions.len());
}

#[test]
fn fact_matching_skips_case_variants_however_many_lead_the_ranking() {
    use hoprag::graph::linking::Linker;
    use hoprag::graph::{Extraction, Triple};
    // Twelve case variants of one statement score alike (the embedder lowercases) and
    // fill the short head the linker asks for first, so it must look further.
    let triple = |passage: u32, s: &str, p: &str, o: &str| Triple {
        passage,
        subject: s.into(),
        predicate: p.into(),
        object: o.into(),
    };
    let mut extraction = Extraction::new(4);
    let variants = ["Varn", "VARN", "varn", "VaRn", "vARN", "VArn", "vaRN", "VarN", "vArn", "vaRn", "varN", "VARn"];
    for (i, v) in variants.iter().enumerate() {
        extraction.triples.push(triple(i as u32 % 4, "Maud Corrigan", "was born in", v));
    }
    extraction.triples.push(triple(1, "Maud Corrigan", "founded", "Ardent Ironworks in Varn"));
    extraction.triples.push(triple(2, "Dunhaven", "lies on", "the Varn estuary"));
    extraction.triples.push(triple(3, "Ardent Ironworks", "closed in", "1947"));
    let embedder = HashEmbedder::new();
    let graph = Arc::new(
        EntityGraph::build(&vec![Passage::default(); 4], extraction, &embedder, &GraphOptions::default(), &Silent)
            .unwrap(),
    );
    let linker = Linker::new(graph.clone());
    let query = embedder.embed_one("Where was Maud Corrigan born, in Varn?", hoprag::embed::TextKind::Query).unwrap();

    // By brute force: every fact scored, best first (ties by fact), one per lowercase text.
    let scores = graph.fact_vectors.dots(&query);
    let mut order: Vec<u32> = (0..scores.len() as u32).collect();
    order.sort_by(|&a, &b| scores[b as usize].total_cmp(&scores[a as usize]).then(a.cmp(&b)));
    let mut seen = std::collections::HashSet::new();
    let want: Vec<u32> = order
        .into_iter()
        .filter(|&f| seen.insert(graph.triples[graph.fact_triple(f) as usize].text().to_lowercase()))
        .map(|f| graph.fact_triple(f))
        .collect();
    for n in 1..=4 {
        let got: Vec<u32> = linker.facts(&query, n).iter().map(|f| f.triple).collect();
        assert_eq!(got, want[..n], "n = {n}");
    }
    assert_eq!(linker.facts(&query, 10).len(), 4, "four distinct statements in all");
    assert!(linker.facts(&query, 0).is_empty());
}

/// A graph embedded by another model than the passages (`--graph-embedder`): the
/// manifest records it, the store reads its vectors back in its own dimension, and the
/// graph methods link the question through that model's vector, computed on demand or
/// supplied in a batch, to the same ranking. Needs MiniLM (`hoprag models fetch minilm`).
#[test]
fn a_graph_with_its_own_embedder_links_questions_in_its_space() {
    use hoprag::embed::{load_embedder, EmbedderSpec};
    let Ok(minilm) = load_embedder(&EmbedderSpec::from_id("minilm").unwrap(), &Default::default()) else {
        eprintln!("skipping: MiniLM is not installed (hoprag models fetch minilm)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let corpus = load_corpus(&common::demo().join("corpus.jsonl"), &CorpusOptions::default()).unwrap();
    // The passages' embedder: 64-dimensional hashing under an id no loader knows, so any
    // question vector the graph gets must come from MiniLM.
    let passages = Arc::new(HashEmbedder { id: "openai:hash-test".into(), dim: 64 });
    let folder = store::folder(dir.path());
    store::build_index(folder.as_ref(), &corpus, vec![], passages.as_ref(), &Default::default(), &Silent).unwrap();
    let index = folder.load().unwrap();
    let graph = EntityGraph::build(
        index.passages().as_slice(),
        extract_heuristic(index.passages().as_slice()),
        minilm.as_ref(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    store::attach_graph(folder.as_ref(), &graph, "heuristic".into()).unwrap();

    let index = folder.load().unwrap();
    assert_eq!(index.manifest.embedder.id, "openai:hash-test");
    let own = index.manifest.graph.as_ref().unwrap().embedder.clone().expect("the graph's embedder is recorded");
    assert_eq!((own.id.as_str(), own.dim), ("minilm", 384));
    let reloaded = folder.load_graph(&index, None).unwrap().unwrap();
    assert_eq!(reloaded.entity_vectors.as_flat(), graph.entity_vectors.as_flat());
    assert_eq!(reloaded.fact_vectors.dim(), 384);

    let engine = Engine::new(folder.clone(), passages, Config::default()).unwrap();
    let text = "Who founded the company that built Varn Light?";
    let batch = engine.embed_queries(&[text.to_string()], &Silent).unwrap().remove(0);
    let in_graph_space = batch.graph_embedding.clone().expect("a batch embeds questions for the graph too");
    assert_eq!(in_graph_space.len(), 384);
    for method in ["ppr", "phasegraph", "naive_ge"] {
        let retriever = engine.retriever(method).unwrap();
        let on_demand = retriever.retrieve(&Query::new(text), 10).unwrap();
        let supplied = retriever.retrieve(&batch, 10).unwrap();
        assert_eq!(on_demand.hits, supplied.hits, "{method}");
        let steps =
            |r: &hoprag::retrieve::Retrieval| -> Vec<String> { r.trace.steps.iter().map(|s| s.name.clone()).collect() };
        assert!(
            steps(&on_demand).iter().any(|s| s == "embed query for the graph"),
            "{method}: {:?}",
            steps(&on_demand)
        );
        assert!(!steps(&supplied).iter().any(|s| s == "embed query for the graph"), "{method}");
    }
    let ppr = engine.retriever("ppr").unwrap().retrieve(&Query::new(text), 10).unwrap();
    let titles: Vec<&str> = ppr.hits.iter().map(|h| engine.index.passage(h.passage).title.as_str()).collect();
    assert!(titles.contains(&"Varn Light"), "{titles:?}");
    // Linked through MiniLM's vector: the facts it found are the question's neighbours
    // among MiniLM's fact vectors.
    let link = ppr.trace.steps.iter().find(|s| s.name == "link entities").unwrap();
    assert!(link.detail.as_array().is_some_and(|l| !l.is_empty()), "{}", link.detail);
}

#[test]
fn embeddinggemma_builds_its_graph_with_minilm_unless_told_otherwise() {
    use hoprag::embed::EmbedderSpec;
    let spec = |s: &str| EmbedderSpec::from_id(s).unwrap();
    assert_eq!(spec("embeddinggemma").default_graph_embedder(), spec("minilm"));
    assert_eq!(spec("embeddinggemma:dim=256").default_graph_embedder(), spec("minilm"));
    assert_eq!(spec("mpnet").default_graph_embedder(), spec("mpnet"));
    assert_eq!(spec("minilm").default_graph_embedder(), spec("minilm"));
}

/// The walk solved when the graph was attached is stored beside it and used; an index
/// whose graph lacks it (written before it was stored) solves it at query time, and
/// ranks the same, to the last bit of every score.
fn stored_walk_ranks_as_one_solved_at_query_time(dir: &std::path::Path, q: &Query) {
    let generation = store::folder(dir).load().unwrap().generation().to_string();
    let walk = dir.join(&generation).join("graph").join("walk.f64");
    assert!(walk.exists(), "attach_graph stores the walk");
    let hits = |dir: &std::path::Path| {
        let engine = Engine::new(store::folder(dir), Arc::new(HashEmbedder::new()), Config::default()).unwrap();
        let graph = engine.graph().unwrap();
        let stats = graph
            .passage_response(engine.index.vectors(), Config::default().methods.ppr.ppr.damping)
            .unwrap()
            .stats()
            .clone();
        let r = engine.retriever("ppr").unwrap().retrieve(q, 10).unwrap();
        (r.hits.iter().map(|h| (h.passage, h.score.to_bits())).collect::<Vec<_>>(), stats.stored)
    };
    let (stored, from_store) = hits(dir);
    assert!(from_store, "the engine used the stored walk");
    let copy = tempfile::tempdir().unwrap();
    common::copy_tree(dir, copy.path());
    std::fs::remove_file(copy.path().join(&generation).join("graph").join("walk.f64")).unwrap();
    let (solved, from_copy) = hits(copy.path());
    assert!(!from_copy, "solved at query time without it");
    assert_eq!(stored, solved);
    // A damaged walk is an error naming its file, not a silent re-solve.
    std::fs::write(copy.path().join(&generation).join("graph").join("walk.f64"), b"garbage").unwrap();
    let engine = Engine::new(store::folder(copy.path()), Arc::new(HashEmbedder::new()), Config::default()).unwrap();
    let err = engine.graph().err().expect("a damaged walk is refused").to_string();
    assert!(err.contains("walk.f64"), "{err}");
}

/// Past the delta limit (1 % of the passages, at least 1,000), an edit from a delta
/// generation writes a whole generation: the passages, vectors and graph a fresh build of
/// the same passages makes.
#[test]
fn an_edit_past_the_delta_limit_writes_the_whole_generation() {
    let dir = tempfile::tempdir().unwrap();
    let index = demo_index(dir.path());
    let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new());
    let triples = store::triples_without_llm(&index, None).unwrap();
    let folder = store::folder(dir.path());
    store::build_graph(folder.as_ref(), &index, triples, embedder.as_ref(), &GraphOptions::default(), &Silent).unwrap();
    let embedders = store::edit::Embedders { passages: embedder.clone(), graph: embedder.clone() };
    let edit = |request| {
        store::edit::edit(folder.as_ref(), &request, &embedders, &Default::default(), &Silent).unwrap();
        folder.load().unwrap()
    };
    let one = edit(store::edit::Request::Delete(vec![index.passage(5).id.clone()]));
    assert!(one.manifest.delta.is_some(), "a small edit is a delta");
    let names = ["Ardent Ironworks", "Zephyr Quarry", "Corvid Mill", "Quillfort", "Orlane"];
    let rows: Vec<Passage> = (0..store::delta::delta_limit(one.len()))
        .map(|i| {
            let (a, b) = (names[i % names.len()], names[(i / names.len()) % names.len()]);
            Passage::new(format!("extra-{i:04}"), format!("Note {i}"), format!("{a} traded with {b} in {}.", 1800 + i))
        })
        .collect();
    let whole = edit(store::edit::Request::Upsert(rows));
    assert!(whole.manifest.delta.is_none(), "past the limit the generation is written whole");
    let graph = folder.load_graph(&whole, None).unwrap().expect("its own graph, no embedder needed");
    let fresh = EntityGraph::build(
        whole.passages().as_slice(),
        extract_heuristic(whole.passages().as_slice()),
        &HashEmbedder::new(),
        &GraphOptions::default(),
        &Silent,
    )
    .unwrap();
    assert_eq!(graph.entities, fresh.entities);
    assert_eq!(graph.triples, fresh.triples);
    assert_eq!(graph.entity_vectors.to_le_bytes(), fresh.entity_vectors.to_le_bytes());
    assert_eq!(graph.fact_vectors.to_le_bytes(), fresh.fact_vectors.to_le_bytes());
    assert!(graph.walk.is_some(), "its walk solved");
}
