use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use hoprag::corpus::{load_corpus, CorpusFormat, CorpusOptions, IngestReport, LoadedCorpus, SplitOptions};
use hoprag::embed::{load_embedder, Embedder, EmbedderSpec};
use hoprag::graph::{FactVectors, ReadOnce};
use hoprag::index::{HnswParams, Quantization, VectorIndexKind};
use hoprag::store::{build_index, BuildOptions, BuildStats};

use super::Context;

#[derive(Args)]
pub struct CorpusArgs {
    /// Corpus: JSON list [{title, text}], JSONL, HotpotQA {title: [sentences]}, or a
    /// folder of .txt/.md files.
    #[arg(long, value_name = "FILE|DIR")]
    pub corpus: PathBuf,
    /// Force the corpus format instead of detecting it.
    #[arg(long, value_parser = parse_format)]
    format: Option<CorpusFormat>,
    /// Folder corpora: passage size in words.
    #[arg(long, default_value_t = SplitOptions::default().max_words)]
    max_words: usize,
    /// Folder corpora: words of overlap between consecutive passages.
    #[arg(long, default_value_t = SplitOptions::default().overlap_words)]
    overlap_words: usize,
    /// Skip passages longer than this many bytes.
    #[arg(long, default_value_t = CorpusOptions::default().max_passage_bytes)]
    max_passage_bytes: usize,
}

fn parse_format(s: &str) -> Result<CorpusFormat, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| "expected json_list, jsonl, hotpot_qa or folder".to_string())
}

impl CorpusArgs {
    pub fn load(&self, ctx: &Context) -> anyhow::Result<LoadedCorpus> {
        let options = CorpusOptions {
            format: self.format,
            max_passage_bytes: self.max_passage_bytes,
            split: SplitOptions { max_words: self.max_words, overlap_words: self.overlap_words },
        };
        let corpus = load_corpus(&self.corpus, &options)?;
        print_ingest(ctx, &corpus.report, corpus.passages.len());
        Ok(corpus)
    }
}

#[derive(Args)]
pub struct IndexArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Where to create the index: a folder, or a PostgreSQL URL
    /// `postgres://USER@HOST:PORT/DB?schema=NAME` (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    out: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// `minilm` (in-process, the default), `mpnet`, `embeddinggemma[:query=qa|retrieval,
    /// title=passage|none,dim=768|512|256|128]` (in-process), `openai:MODEL` (an OpenAI-compatible
    /// endpoint; env HOPRAG_EMBED_BASE_URL, HOPRAG_EMBED_API_KEY) or
    /// `composed-minilm-words-centred-idf-v1[:KEY]` (the scale benchmark's word table KEY).
    #[arg(long, default_value = "minilm")]
    embedder: EmbedderSpec,
    /// Vector index: exact, hnsw, or auto (HNSW from 50,000 passages).
    #[arg(long, default_value_t = VectorIndexKind::Auto)]
    vector_index: VectorIndexKind,
    /// How the HNSW graph stores its copy of the vectors: i8 (a quarter of the memory,
    /// candidates re-scored exactly on the f32 vectors) or f32.
    #[arg(long, default_value = "i8", value_name = "i8|f32")]
    hnsw_quantization: Quantization,
    /// Replace an existing index at --out.
    #[arg(long)]
    force: bool,
    /// Where the entity graph's triples come from (for ppr, phasegraph and `auto`):
    /// by default the LLM-free heuristic extractor; --triples FILE imports OpenIE
    /// triples, --extract llm asks the configured chat model.
    #[command(flatten)]
    graph: super::graph::TripleSource,
    /// Build no entity graph: dense, BM25 and hybrid only (`auto` is then dense).
    #[arg(long, conflicts_with_all = ["triples", "extract"])]
    no_graph: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

const SHOWN: usize = 10;

pub fn print_ingest(ctx: &Context, report: &IngestReport, kept: usize) {
    if ctx.json {
        return;
    }
    eprintln!("{}", report.summary(kept));
    for (label, list) in
        [("skipped", &report.skipped), ("duplicate", &report.duplicates), ("warning", &report.warnings)]
    {
        for s in list.iter().take(SHOWN) {
            eprintln!("  {label}: {}: {}", s.location, s.reason);
        }
        if list.len() > SHOWN {
            eprintln!("  ... and {} more {label} entries (--json lists them all)", list.len() - SHOWN);
        }
    }
}

fn print_stats(ctx: &Context, location: &str, stats: &BuildStats, report: &IngestReport) -> anyhow::Result<()> {
    if ctx.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"index": location, "stats": stats, "ingest": report}))?
        );
    } else {
        println!(
            "index {}: {} passages ({} added) in {:.1}s (embedding {:.1}s, lexical {:.2}s, vectors {:.2}s, write {:.2}s), {:.1} MB on disk",
            location,
            stats.passages_total,
            stats.passages_added,
            stats.total_secs,
            stats.embed_secs,
            stats.lexical_secs,
            stats.vector_secs,
            stats.write_secs,
            stats.bytes_on_disk as f64 / 1e6
        );
    }
    Ok(())
}

/// The most the passages' pass keeps for the graph's contextual facts (about 1.4 million
/// MiniLM vectors); a larger corpus's graph reads the rest of its passages again.
const READ_ONCE_BYTES: usize = 2 << 30;

pub fn run_index(ctx: &Context, args: IndexArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let corpus = args.corpus.load(ctx)?;
    // A new index names the composed embedder's word table, whichever way it was asked for.
    let spec = args.embedder.pinned()?;
    let embedder = load_embedder(&spec, &ctx.config.embedder)?;
    ctx.note(format!("embedding with {} ({} dimensions)", embedder.id(), embedder.dim()));
    let hnsw = HnswParams { quantization: args.hnsw_quantization, ..Default::default() };
    let options = BuildOptions { vector_index: args.vector_index, hnsw, overwrite: args.force, ..Default::default() };
    let source = args.corpus.corpus.display().to_string();
    let store = super::open_store(&args.out, &args.namespace, hoprag::store::Open::OrCreate)?;
    let mut graph_source = args.graph.clone();
    if !graph_source.is_set() {
        // The default graph needs no LLM and no extra file.
        graph_source.extract = Some(super::graph::Extractor::Heuristic);
    }
    // The default graph's facts are read in their passages (contextual fact vectors):
    // read with the passages, each passage goes through the model once. Only where the
    // graph's embedder is the passages' own: beside EmbeddingGemma the graph reads with
    // MiniLM, and spans kept from EmbeddingGemma's pass would go unused.
    let heuristic =
        graph_source.triples.is_none() && matches!(graph_source.extract, Some(super::graph::Extractor::Heuristic));
    let read_once = (!args.no_graph
        && heuristic
        && graph_source.graph_embedder.is_none()
        && spec.default_graph_embedder() == spec
        && ctx.config.graph.fact_vectors == FactVectors::Contextual)
        .then(|| {
            let extraction = hoprag::graph::extract_heuristic(&corpus.passages);
            ReadOnce::new(embedder.as_ref(), &corpus.passages, &extraction.triples, READ_ONCE_BYTES)
        });
    let passage_embedder: &dyn Embedder = match &read_once {
        Some(read) => read,
        None => embedder.as_ref(),
    };
    let stats = build_index(store.as_ref(), &corpus, vec![source], passage_embedder, &options, &ctx.progress)
        .with_context(|| format!("building the index in {}", store.location()))?;
    if !ctx.json {
        print_stats(ctx, store.location(), &stats, &corpus.report)?;
    }
    let mut graph = serde_json::Value::Null;
    if !args.no_graph {
        let t = std::time::Instant::now();
        let read = read_once.as_ref().map(|r| r as &dyn Embedder);
        graph = super::graph::build_and_attach(ctx, store.as_ref(), &graph_source, read)?;
        drop(read_once);
        graph["secs"] = serde_json::json!(t.elapsed().as_secs_f64());
        ctx.note(format!(
            "the entity graph added {:.1}s to the index build ({:.1}s in all; --no-graph skips it)",
            t.elapsed().as_secs_f64(),
            stats.total_secs + t.elapsed().as_secs_f64()
        ));
    }
    let time = time_json(started.elapsed().as_secs_f64(), &stats, &graph);
    if ctx.json {
        let out = serde_json::json!({"index": store.location(), "stats": stats, "ingest": corpus.report, "graph": graph,
                                     "time": time});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("time: {}", time_line(&time));
    }
    Ok(())
}

/// Where the whole `hoprag index` went: the passages' embedding (and passages per
/// second), the graph's parts under the names `hoprag graph --json` gives them
/// ([`super::graph::times_line`]), and the rest (reading the corpus, loading the models,
/// the lexical index, writing).
fn time_json(total_secs: f64, stats: &BuildStats, graph: &serde_json::Value) -> serde_json::Value {
    let passages_per_sec = if stats.embed_secs > 0.0 { stats.passages_added as f64 / stats.embed_secs } else { 0.0 };
    let mut time = serde_json::json!({
        "total_secs": total_secs,
        "passages_secs": stats.embed_secs,
        "passages_embedded": stats.passages_added,
        "passages_per_sec": passages_per_sec,
    });
    let mut parts = stats.embed_secs;
    if let Some(times) = graph["times"].as_object() {
        for (key, value) in times {
            if key.ends_with("_secs") {
                parts += value.as_f64().unwrap_or(0.0);
            }
            time[key] = value.clone();
        }
    }
    time["other_secs"] = serde_json::json!((total_secs - parts).max(0.0));
    time
}

fn time_line(time: &serde_json::Value) -> String {
    let f = |key: &str| time[key].as_f64().unwrap_or(0.0);
    let mut line = format!(
        "{:.1}s in all: embedding passages {:.1}s ({:.1}/s)",
        f("total_secs"),
        f("passages_secs"),
        f("passages_per_sec")
    );
    if time.get("extract_secs").is_some() {
        line += &format!(", {}", super::graph::times_line(time));
    }
    line + &format!(", other {:.1}s", f("other_secs"))
}
