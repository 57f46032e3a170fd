//! `hoprag bench embed`: passage throughput and single-query latency of an embedder, with
//! sentence-transformers (`../shared/peers/embed_bench.py`) measured in the same run on
//! the same passages, threads and model files when `--peer` is given.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context as _};
use clap::Args;
use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::embed::{embed_all, load_embedder, EmbedderSpec, LocalModel, TextKind};
use serde::{Deserialize, Serialize};

use crate::output::table;
use crate::Context;

#[derive(Args)]
pub struct EmbedBench {
    /// Corpus whose first passages are embedded (text = title, newline, text).
    #[arg(long, value_name = "FILE|DIR")]
    corpus: PathBuf,
    /// Passages to embed.
    #[arg(long, default_value_t = 600)]
    limit: usize,
    /// Embedder, as for `hoprag index`.
    #[arg(long, default_value = "minilm")]
    embedder: EmbedderSpec,
    /// Texts handed to the embedder per call (the peer's `batch_size`).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Single-query latency samples (the first passages' titles + 80 characters, as the peer).
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Also run sentence-transformers on the same passages, threads and model files.
    #[arg(long)]
    peer: bool,
    /// The peer's Python (a virtual environment with torch and sentence-transformers).
    #[arg(long, value_name = "PATH", default_value_os_t = default_peer_python())]
    peer_python: PathBuf,
    /// The peer script.
    #[arg(long, value_name = "PATH", default_value = "../shared/peers/embed_bench.py")]
    peer_script: PathBuf,
}

fn default_peer_python() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    home.join(".cache/hoprag-peers/bin/python")
}

/// The figures of one embedder; the peer prints the same keys.
#[derive(Serialize, Deserialize, Clone)]
struct Figures {
    #[serde(default)]
    peer: Option<String>,
    threads: usize,
    passages: usize,
    tokens: usize,
    seconds: f64,
    passages_per_s: f64,
    tokens_per_s: f64,
    query_ms_p50: f64,
    query_ms_p95: f64,
}

#[derive(Serialize)]
struct Report {
    embedder: String,
    #[serde(flatten)]
    figures: Figures,
    peer: Option<Figures>,
    /// hoprag's passages/s over the peer's.
    speedup: Option<f64>,
}

pub fn run(ctx: &Context, args: EmbedBench) -> anyhow::Result<()> {
    let corpus = load_corpus(&args.corpus, &CorpusOptions::default())?;
    let texts: Vec<String> = corpus.passages.iter().take(args.limit).map(|p| p.index_text()).collect();
    if texts.is_empty() {
        bail!("{}: no passages", args.corpus.display());
    }
    let embedder = load_embedder(&args.embedder, &ctx.config.embedder)?;
    let threads = hoprag::threads::get();
    let tokens: usize = embedder.token_counts(&texts).map_or(0, |c| c.iter().sum());

    // Warm-up as the peer does (first 64 passages), then the timed run.
    embed_all(embedder.as_ref(), &texts[..texts.len().min(64)], TextKind::Passage, args.batch, &|_| {})?;
    ctx.progress.start("embedding", texts.len() as u64);
    let t = Instant::now();
    embed_all(embedder.as_ref(), &texts, TextKind::Passage, args.batch, &|n| ctx.progress.advance(n as u64))?;
    let seconds = t.elapsed().as_secs_f64();
    ctx.progress.finish();

    let queries: Vec<String> = texts.iter().take(args.queries).map(|t| peer_query(t)).collect();
    let mut latencies = Vec::with_capacity(queries.len());
    for q in &queries {
        let t = Instant::now();
        embedder.embed_one(q, TextKind::Query)?;
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    let at = |p: f64| latencies[(p * (latencies.len() - 1) as f64) as usize];
    let figures = Figures {
        peer: None,
        threads,
        passages: texts.len(),
        tokens,
        seconds,
        passages_per_s: texts.len() as f64 / seconds,
        tokens_per_s: tokens as f64 / seconds,
        query_ms_p50: median(&latencies),
        query_ms_p95: at(0.95),
    };

    let peer = if args.peer { Some(run_peer(&args, threads, &ctx.config.embedder)?) } else { None };
    let report = Report {
        embedder: embedder.id().to_string(),
        speedup: peer.as_ref().map(|p| figures.passages_per_s / p.passages_per_s),
        figures,
        peer,
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let row = |name: &str, f: &Figures| {
        vec![
            name.to_string(),
            f.threads.to_string(),
            f.passages.to_string(),
            format!("{:.1}", f.passages_per_s),
            format!("{:.0}", f.tokens_per_s),
            format!("{:.2}", f.query_ms_p50),
            format!("{:.2}", f.query_ms_p95),
        ]
    };
    let mut rows = vec![row(&format!("hoprag {}", report.embedder), &report.figures)];
    if let Some(p) = &report.peer {
        rows.push(row(p.peer.as_deref().unwrap_or("peer"), p));
    }
    let header: Vec<String> =
        ["embedder", "threads", "passages", "passages/s", "tokens/s", "query p50 ms", "query p95 ms"]
            .map(String::from)
            .to_vec();
    println!("{}", table(&header, &rows));
    if let Some(s) = report.speedup {
        println!("hoprag / peer passages/s: {s:.2}x");
    }
    Ok(())
}

/// The peer's single-query text: a passage's title and its first 80 characters.
fn peer_query(text: &str) -> String {
    let (title, body) = text.split_once('\n').unwrap_or((text, text));
    format!("{title} {}", body.chars().take(80).collect::<String>())
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn run_peer(args: &EmbedBench, threads: usize, settings: &hoprag::embed::EmbedderSettings) -> anyhow::Result<Figures> {
    // The peer's model arguments: MiniLM's and MPNet's three files as a bare transformer
    // with mean pooling, EmbeddingGemma's whole sentence-transformers folder with the same
    // query prompt as hoprag's (its passages get the model's `document` prompt,
    // `title: none | text: `, so `title=none` on hoprag's side embeds the same tokens).
    let model_args: Vec<std::ffi::OsString> = match &args.embedder {
        EmbedderSpec::Local(model) => {
            let dir = match (&settings.minilm_dir, model) {
                (Some(d), LocalModel::MiniLm) => d.clone(),
                _ => hoprag::models::require(model.id())?,
            };
            vec!["--model".into(), dir.into()]
        }
        EmbedderSpec::Gemma(options) => {
            let dir = hoprag::models::require(hoprag::embed::gemma::NAME)?;
            if options.dim != 768 {
                bail!("--peer compares the full 768 dimensions: leave out dim=");
            }
            let embedder = hoprag::embed::GemmaEmbedder::prompt_of(options.query);
            vec!["--st".into(), dir.into(), "--query-prompt".into(), embedder.into()]
        }
        EmbedderSpec::OpenAi { .. } | EmbedderSpec::Composed { .. } => {
            bail!("--peer runs sentence-transformers on the same model files: it needs a local model")
        }
    };
    if !args.peer_python.is_file() {
        bail!(
            "{} not found: set up the peer with `python3 -m venv ~/.cache/hoprag-peers && \
             ~/.cache/hoprag-peers/bin/pip install torch sentence-transformers` (or pass --peer-python)",
            args.peer_python.display()
        );
    }
    let out = Command::new(&args.peer_python)
        .arg(&args.peer_script)
        .arg(&args.corpus)
        .args(["--limit", &args.limit.to_string(), "--threads", &threads.to_string()])
        .args(["--batch", &args.batch.to_string(), "--queries", &args.queries.to_string()])
        .args(&model_args)
        .output()
        .with_context(|| format!("running {} {}", args.peer_python.display(), args.peer_script.display()))?;
    if !out.status.success() {
        bail!("the peer failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("the peer printed no JSON figures: {stdout}"))
}
