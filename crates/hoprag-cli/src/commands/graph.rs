use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hoprag::embed::{Embedder, EmbedderSpec};
use hoprag::graph::{extract_llm, Extraction, GraphOptions, LlmExtractOptions, LlmExtractReport};
use hoprag::index::Index;
use hoprag::llm::{default_cache_dir, LlmSource};
use hoprag::store::{build_graph, graph_embedder, triples_without_llm, GraphBuilt, Store};

use super::Context;

#[derive(Clone, Copy, ValueEnum)]
pub enum Extractor {
    /// LLM-free: title, capitalised spans, numbers and dates; triples from entity pairs.
    Heuristic,
    /// One call per passage to a chat model for its entities and triples: an
    /// OpenAI-compatible endpoint (env HOPRAG_LLM_BASE_URL, HOPRAG_LLM_MODEL,
    /// HOPRAG_LLM_API_KEY), else the local GGUF model (qwen2.5-0.5b unless --llm-local or
    /// HOPRAG_LLM_LOCAL names another). Answers are cached, so an interrupted run resumes
    /// where it stopped when run again.
    Llm,
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
    /// --extract llm: the chat endpoint, e.g. http://127.0.0.1:8000/v1 (overrides
    /// HOPRAG_LLM_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub llm_base_url: Option<String>,
    /// --extract llm: the model to ask (overrides HOPRAG_LLM_MODEL).
    #[arg(long, value_name = "MODEL")]
    pub llm_model: Option<String>,
    /// --extract llm without an endpoint: the local model, `qwen2.5-0.5b`, `smollm2`, ... or a
    /// .gguf path (overrides HOPRAG_LLM_LOCAL).
    #[arg(long, value_name = "NAME|PATH")]
    pub llm_local: Option<String>,
    /// Cosine from which two entities are linked as synonyms (default 0.8, or
    /// `graph.synonym_threshold` of the configuration).
    #[arg(long)]
    pub synonym_threshold: Option<f32>,
    /// The embedder of the graph's entity and fact vectors (default: `minilm` beside
    /// `embeddinggemma`, else the index's own); questions are embedded by both.
    #[arg(long, value_name = "EMBEDDER")]
    pub graph_embedder: Option<EmbedderSpec>,
}

impl TripleSource {
    pub fn is_set(&self) -> bool {
        self.triples.is_some() || self.extract.is_some()
    }
}

#[derive(Args)]
pub struct GraphArgs {
    /// The index: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`
    /// (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    #[command(flatten)]
    source: TripleSource,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Context, args: GraphArgs) -> anyhow::Result<()> {
    if !args.source.is_set() {
        anyhow::bail!("say where the triples come from: --triples OPENIE.json or --extract heuristic|llm");
    }
    let summary = build_and_attach(
        ctx,
        super::open_store(&args.index, &args.namespace, hoprag::store::Open::Existing)?.as_ref(),
        &args.source,
        None,
    )?;
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    }
    Ok(())
}

/// Builds the graph for the index in `store` and attaches it as a new generation;
/// prints a summary unless the output is JSON, and returns the JSON summary. `read`:
/// the embedder that read the index's passages, if it is the graph's too and kept what
/// the graph's contextual facts need ([`hoprag::graph::ReadOnce`]).
pub fn build_and_attach(
    ctx: &Context,
    store: &dyn Store,
    source: &TripleSource,
    read: Option<&dyn Embedder>,
) -> anyhow::Result<serde_json::Value> {
    let index = store.load()?;
    let config = ctx.config_for(store, &[])?;
    let mut llm_report = None;
    let extract_started = std::time::Instant::now();
    let (extraction, label): (Extraction, String) = match (&source.triples, source.extract) {
        (Some(path), _) => triples_without_llm(&index, Some(path.as_path()))?,
        (None, Some(Extractor::Heuristic)) => triples_without_llm(&index, None)?,
        (None, Some(Extractor::Llm)) => {
            let (extraction, report, model) = llm_extraction(ctx, &config.llm, &index, source)?;
            // No answer used: every triple is the LLM-free stand-in, and the graph says so.
            let label = if report.answered == 0 { "heuristic".to_string() } else { format!("llm:{model}") };
            llm_report = Some(report);
            (extraction, label)
        }
        (None, None) => anyhow::bail!("no triple source given"),
    };
    let extract_secs = extract_started.elapsed().as_secs_f64();
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
    let loaded = graph_embedder(&index, source.graph_embedder.as_ref(), &config.embedder)?;
    let embedder: &dyn Embedder = match read {
        Some(read) if read.id() == loaded.id() && read.dim() == loaded.dim() => read,
        _ => loaded.as_ref(),
    };
    ctx.note(format!("embedding the graph's entities and facts with {}", embedder.id()));
    let synonym_threshold = source.synonym_threshold.unwrap_or(config.graph.synonym_threshold);
    let options = GraphOptions { synonym_threshold, ..config.graph };
    let built = build_graph(store, &index, (extraction, label), embedder, &options, &ctx.progress)?;
    let (s, report) = (&built.stats, &built.extraction);
    let times = times_json(extract_secs, &built);
    let out = serde_json::json!({"source": built.source, "embedder": built.embedder, "stats": s, "extraction": report,
                                 "llm": llm_report, "times": times});
    if !ctx.json {
        println!(
            "graph: {} entities, {} triples ({} distinct, {} degenerate), {} relation edges, {} synonym links, {} passage-entity \
             edges, {} components, {} passages without entities; built in {:.1}s ({:.1}s embedding)",
            s.entities,
            s.triples,
            s.facts,
            report.degenerate_triples,
            s.relation_edges,
            s.synonym_edges,
            s.passage_entity_edges,
            s.components,
            s.isolated_passages,
            s.build_secs,
            s.embed_secs
        );
        println!("graph time: {}", times_line(&times));
    }
    Ok(out)
}

/// Where a graph build's time went, as `hoprag graph --json` and `hoprag index --json`
/// report it: the extraction, the embedding of the entities' labels and of the facts'
/// texts (texts embedded, reused from the graph before an edit, and per second), the
/// synonym links and the walk's solve.
fn times_json(extract_secs: f64, built: &GraphBuilt) -> serde_json::Value {
    let t = &built.times;
    serde_json::json!({
        "extract_secs": extract_secs,
        "entity_embed_secs": t.entities.secs,
        "entities_embedded": t.entities.texts,
        "entities_reused": t.entities.reused,
        "entities_per_sec": t.entities.texts_per_sec(),
        "fact_embed_secs": t.facts.secs,
        "facts_embedded": t.facts.texts,
        "facts_reused": t.facts.reused,
        "facts_per_sec": t.facts.texts_per_sec(),
        "synonym_secs": t.synonym_secs,
        "walk_secs": built.attached.walk_secs.unwrap_or(0.0),
    })
}

/// [`times_json`] on one line, for the human summaries.
pub fn times_line(t: &serde_json::Value) -> String {
    let f = |key: &str| t[key].as_f64().unwrap_or(0.0);
    format!(
        "extraction {:.1}s, embedding entities {:.1}s ({} texts, {:.0}/s), embedding facts {:.1}s ({} texts, {:.0}/s), \
         synonyms {:.1}s, walk {:.1}s",
        f("extract_secs"),
        f("entity_embed_secs"),
        t["entities_embedded"],
        f("entities_per_sec"),
        f("fact_embed_secs"),
        t["facts_embedded"],
        f("facts_per_sec"),
        f("synonym_secs"),
        f("walk_secs"),
    )
}

/// `--extract llm`: the configured model (flags over env; the local model when no
/// endpoint is named) behind the response cache, one call per passage, and the cost
/// report.
fn llm_extraction(
    ctx: &Context,
    llm: &hoprag::llm::OpenAiChatConfig,
    index: &Index,
    source: &TripleSource,
) -> anyhow::Result<(Extraction, LlmExtractReport, String)> {
    let mut config = llm.clone();
    if let Some(url) = &source.llm_base_url {
        config.base_url = url.clone();
        if config.model.trim().is_empty() && source.llm_model.is_none() {
            anyhow::bail!("--llm-base-url needs the model to ask there: --llm-model NAME or HOPRAG_LLM_MODEL");
        }
    }
    if let Some(model) = &source.llm_model {
        config.model = model.clone();
    }
    if let Some(local) = &source.llm_local {
        config.local = local.clone();
    }
    let (llm, from) = hoprag::retrieve::gear::llm_from_config(&config)?;
    from.check()?;
    let options = match &from {
        LlmSource::Endpoint { .. } => LlmExtractOptions { concurrency: config.max_concurrency, ..Default::default() },
        // One generation at a time in-process, so more threads would only wait; and a
        // small model that loops would otherwise write 2048 tokens at a few per second.
        LlmSource::Local(_) | LlmSource::Given(_) => LlmExtractOptions { concurrency: 1, max_tokens: Some(512) },
    };
    let model = match &from {
        LlmSource::Endpoint { model, .. } => model.clone(),
        LlmSource::Local(_) | LlmSource::Given(_) => llm.id().to_string(),
    };
    // The cache is what makes the run resumable: every answer is on disk as soon as it
    // arrives, so running the command again only asks for what is missing.
    ctx.note(format!(
        "extracting triples from {} passages with {from}; answers cached in {} (an interrupted run resumes from \
         there)",
        index.len(),
        default_cache_dir().display()
    ));
    let (extraction, report) = extract_llm(index.passages().as_slice(), llm.as_ref(), &options, &ctx.progress)?;
    let s = &report.llm;
    ctx.note(format!(
        "{model} answered {} of {} passages: {} calls ({} from the cache, {} retries, {} failed); tokens spent {} \
         prompt + {} completion, from the cache {} prompt + {} completion; {} answers unparseable",
        report.answered,
        report.passages,
        s.calls,
        s.cache_hits,
        s.retries,
        s.errors,
        s.tokens_spent.prompt_tokens,
        s.tokens_spent.completion_tokens,
        s.tokens_from_cache.prompt_tokens,
        s.tokens_from_cache.completion_tokens,
        s.parse_failures
    ));
    for failure in s.parse_failure_examples.iter().take(3) {
        ctx.note(format!("  unparseable: {failure}"));
    }
    for failure in report.failure_examples.iter().take(3) {
        ctx.note(format!("  failed: {failure}"));
    }
    if report.heuristic_fallback_passages > 0 {
        ctx.note(format!(
            "warning: {} of {} passages ({} failed, {} unparseable) have the LLM-free (heuristic) triples instead; run \
             the same command again to ask for them (the answered ones come from the cache){}",
            report.heuristic_fallback_passages,
            report.passages,
            report.failed_passages,
            report.unparsed_passages,
            if report.answered == 0 { "; no passage was answered, so the graph is recorded as heuristic" } else { "" }
        ));
    }
    Ok((extraction, report, model))
}
