//! `hoprag bench graph`: entity-graph build time and memory on a corpus with the
//! LLM-free heuristic triples, split into extraction, embedding (entity labels and
//! triple texts), synonym linking and the PPR adjacency.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::embed::{load_embedder, EmbedderSpec};
use hoprag::graph::ppr::PprGraph;
use hoprag::graph::{extract_heuristic, EntityGraph};
use serde::Serialize;

use super::peak_rss_mb;
use crate::Context;

#[derive(Args)]
pub struct GraphBench {
    /// Corpus to extract and build the graph from.
    #[arg(long, value_name = "FILE|DIR")]
    corpus: PathBuf,
    /// Embedder for entity labels and triple texts.
    #[arg(long, default_value = "minilm")]
    embedder: EmbedderSpec,
}

#[derive(Serialize)]
struct Report {
    passages: usize,
    stats: hoprag::graph::GraphStats,
    extract_secs: f64,
    /// Graph build minus embedding: normalisation, edges, synonym search, components.
    structure_secs: f64,
    embed_secs: f64,
    ppr_adjacency_ms: f64,
    total_secs: f64,
    peak_rss_mb: f64,
}

pub fn run(ctx: &Context, args: GraphBench) -> anyhow::Result<()> {
    let corpus = load_corpus(&args.corpus, &CorpusOptions::default())?;
    let embedder = load_embedder(&args.embedder, &ctx.config.embedder)?;
    let started = Instant::now();
    let t = Instant::now();
    let extraction = extract_heuristic(&corpus.passages);
    let extract_secs = t.elapsed().as_secs_f64();
    ctx.note(format!("{} passages: {} heuristic triples", corpus.passages.len(), extraction.triples.len()));
    let graph = EntityGraph::build(&corpus.passages, extraction, embedder.as_ref(), &ctx.config.graph, ctx.progress)?;
    let t = Instant::now();
    let ppr = PprGraph::from_entity_graph(&graph);
    let ppr_adjacency_ms = t.elapsed().as_secs_f64() * 1e3;
    std::hint::black_box(ppr.edges());
    let s = graph.stats.clone();
    let report = Report {
        passages: corpus.passages.len(),
        extract_secs,
        structure_secs: s.build_secs - s.embed_secs,
        embed_secs: s.embed_secs,
        ppr_adjacency_ms,
        total_secs: started.elapsed().as_secs_f64(),
        peak_rss_mb: peak_rss_mb(),
        stats: s,
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let s = &report.stats;
        println!(
            "{} passages -> {} entities, {} triples, {} relation edges, {} synonym links, {} components",
            report.passages, s.entities, s.triples, s.relation_edges, s.synonym_edges, s.components
        );
        println!(
            "build {:.1}s: extraction {:.2}s, embedding {:.1}s, structure and synonym search {:.2}s, \
             PPR adjacency {:.1} ms; peak memory {:.0} MB",
            report.total_secs,
            report.extract_secs,
            report.embed_secs,
            report.structure_secs,
            report.ppr_adjacency_ms,
            report.peak_rss_mb
        );
    }
    Ok(())
}
