use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use hoprag::embed::{load_embedder, EmbedderSpec};
use hoprag::graph::{extract_heuristic, import_openie, EntityGraph, Extraction, GraphOptions};
use hoprag::index::Index;

use super::Context;

#[derive(Clone, Copy, ValueEnum)]
pub enum Extractor {
    /// LLM-free: title, capitalised spans, numbers and dates; triples from entity pairs.
    Heuristic,
}

/// Where the triples come from (shared by `hoprag index` and `hoprag graph`).
#[derive(Args, Clone)]
pub struct TripleSource {
    /// Import triples from a HippoRAG OpenIE file (v1 or v2).
    #[arg(long, value_name = "OPENIE.json", conflicts_with = "extract")]
    pub triples: Option<PathBuf>,
    /// Extract triples from the passages.
    #[arg(long, value_enum)]
    pub extract: Option<Extractor>,
    /// Cosine from which two entities are linked as synonyms.
    #[arg(long, default_value_t = GraphOptions::default().synonym_threshold)]
    pub synonym_threshold: f32,
}

impl TripleSource {
    pub fn is_set(&self) -> bool {
        self.triples.is_some() || self.extract.is_some()
    }
}

#[derive(Args)]
pub struct GraphArgs {
    /// Existing index directory.
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    #[command(flatten)]
    source: TripleSource,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: GraphArgs) -> anyhow::Result<()> {
    if !args.source.is_set() {
        anyhow::bail!("say where the triples come from: --triples OPENIE.json or --extract heuristic");
    }
    build_and_attach(ctx, &args.index, &args.source)
}

/// Builds the graph for the index at `dir` and attaches it as a new generation.
pub fn build_and_attach(ctx: &Context, dir: &Path, source: &TripleSource) -> anyhow::Result<()> {
    let index = Index::open(dir)?;
    let (extraction, label): (Extraction, String) = match (&source.triples, source.extract) {
        (Some(path), _) => (import_openie(path, index.passages())?, path.display().to_string()),
        (None, Some(Extractor::Heuristic)) => (extract_heuristic(index.passages()), "heuristic".to_string()),
        (None, None) => anyhow::bail!("no triple source given"),
    };
    let r = &extraction.report;
    ctx.note(format!(
        "{label}: {} triples; {} malformed triples and {} malformed entities skipped; {} documents matched no passage",
        extraction.triples.len(),
        r.malformed_triples,
        r.malformed_entities,
        r.unmatched_docs.len()
    ));
    for example in r.malformed_examples.iter().take(5) {
        ctx.note(format!("  malformed: {example}"));
    }
    for doc in r.unmatched_docs.iter().take(5) {
        ctx.note(format!("  unmatched: {doc}"));
    }
    let embedder = load_embedder(&EmbedderSpec::from_id(&index.manifest.embedder.id)?, &ctx.config.embedder)?;
    let options = GraphOptions { synonym_threshold: source.synonym_threshold, ..ctx.config.graph };
    let report = extraction.report.clone();
    let graph = EntityGraph::build(index.len(), extraction, embedder.as_ref(), &options, &ctx.progress)?;
    Index::attach_graph(dir, &graph, label)?;
    let s = &graph.stats;
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"stats": s, "extraction": report}))?);
    } else {
        println!(
            "graph: {} entities, {} triples ({} degenerate), {} relation edges, {} synonym links, {} passage-entity \
             edges, {} components, {} passages without entities; built in {:.1}s ({:.1}s embedding)",
            s.entities,
            s.triples,
            report.degenerate_triples,
            s.relation_edges,
            s.synonym_edges,
            s.passage_entity_edges,
            s.components,
            s.isolated_passages,
            s.build_secs,
            s.embed_secs
        );
    }
    Ok(())
}
