//! `hoprag bench index`: index build and query speed on a corpus, with the peers the
//! targets are stated against measured in the same run (memory bandwidth for exact
//! search, exact search for HNSW).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use hoprag::corpus::{load_corpus, CorpusOptions};
use hoprag::embed::{load_embedder, EmbedderSpec, TextKind};
use hoprag::index::{ExactIndex, VectorIndex, VectorIndexKind};
use hoprag::retrieve::{bm25, dense, hybrid, Bm25, Dense, Hybrid, Query, Retriever};
use hoprag::store::{build_index, BuildOptions};
use hoprag::text::sentences;
use rayon::prelude::*;
use serde::Serialize;

use super::{peak_rss_mb, percentiles, Percentiles};
use crate::output::table;
use crate::Context;

#[derive(Args)]
pub struct IndexBench {
    /// Corpus to index.
    #[arg(long, value_name = "FILE|DIR")]
    corpus: PathBuf,
    /// Embedder, as for `hoprag index`.
    #[arg(long, default_value = "minilm")]
    embedder: EmbedderSpec,
    /// Number of queries (the first sentence of evenly spaced passages).
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Times each query is repeated for latency figures.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Passages per query.
    #[arg(short, default_value_t = 10)]
    k: usize,
}

#[derive(Serialize)]
struct Report {
    passages: usize,
    threads: usize,
    build: BuildReport,
    queries: usize,
    k: usize,
    latency_ms: Vec<LatencyRow>,
    query_embedding_ms: Percentiles,
    exact_vs_bandwidth: Bandwidth,
    hnsw_recall_at_k: f64,
    index_bytes: u64,
    peak_rss_mb: f64,
}

#[derive(Serialize)]
struct BuildReport {
    total_secs: f64,
    embed_secs: f64,
    rest_secs: f64,
    rest_share: f64,
    lexical_secs: f64,
    hnsw_secs: f64,
    write_secs: f64,
    load_secs: f64,
    passages_per_sec: f64,
}

#[derive(Serialize)]
struct LatencyRow {
    method: String,
    excluding_embedding: Percentiles,
    including_embedding: Percentiles,
}

#[derive(Serialize)]
struct Bandwidth {
    matrix_mb: f64,
    /// Parallel read bandwidth over a 512 MB buffer (DRAM).
    dram_gb_per_s: f64,
    /// Parallel read bandwidth over the vector matrix itself (cache-resident if small).
    matrix_read_gb_per_s: f64,
    /// Time to read the matrix once at the better of the two bandwidths.
    bound_ms: f64,
    exact_p50_ms: f64,
    ratio_to_bound: f64,
}

/// Best-of-5 parallel read bandwidth over `data`, in GB/s.
fn read_bandwidth(data: &[f32]) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let s: f32 = data.par_chunks(1 << 16).map(|c| c.iter().sum::<f32>()).sum();
        std::hint::black_box(s);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (data.len() * 4) as f64 / best / 1e9
}

pub fn run(ctx: &Context, args: IndexBench) -> anyhow::Result<()> {
    let t = Instant::now();
    let corpus = load_corpus(&args.corpus, &CorpusOptions::default())?;
    let load_secs = t.elapsed().as_secs_f64();
    let embedder = load_embedder(&args.embedder, &ctx.config.embedder)?;
    let dir = tempfile::tempdir()?;
    // HNSW is built too (whatever `auto` would choose) so both searches can be timed.
    let options = BuildOptions { vector_index: VectorIndexKind::Hnsw, ..Default::default() };
    let store = hoprag::store::folder(dir.path());
    let stats = build_index(store.as_ref(), &corpus, vec![], embedder.as_ref(), &options, ctx.progress)?;
    let total = stats.total_secs + load_secs;
    let rest = total - stats.embed_secs;
    let build = BuildReport {
        total_secs: total,
        embed_secs: stats.embed_secs,
        rest_secs: rest,
        rest_share: rest / total,
        lexical_secs: stats.lexical_secs,
        hnsw_secs: stats.vector_secs,
        write_secs: stats.write_secs,
        load_secs,
        passages_per_sec: corpus.passages.len() as f64 / stats.embed_secs,
    };

    let index = Arc::new(store.load()?);
    let step = (index.len() / args.queries.max(1)).max(1);
    let texts: Vec<String> = index
        .passages()
        .iter()
        .step_by(step)
        .take(args.queries)
        .map(|p| sentences(&p.text).first().map_or(p.title.clone(), |s| s.to_string()))
        .collect();
    ctx.note(format!("timing {} queries x {} repeats", texts.len(), args.repeat));
    let mut embed_ms = Vec::new();
    let mut queries = Vec::new();
    for t in &texts {
        let start = Instant::now();
        let v = embedder.embed_one(t, TextKind::Query)?;
        embed_ms.push(start.elapsed().as_secs_f64() * 1e3);
        queries.push(Query::with_embedding(t.clone(), v));
    }
    let query_embedding_ms = percentiles(embed_ms.clone());

    let exact: Arc<dyn VectorIndex> = Arc::new(ExactIndex::new(index.vectors().clone()));
    let hnsw = index.vector_index();
    let (bm25, dense, hybrid) = (bm25::SPEC.name, dense::SPEC.name, hybrid::SPEC.name);
    let methods: Vec<(String, Box<dyn Retriever>)> = vec![
        (bm25.to_string(), Box::new(Bm25::new(index.clone()))),
        (format!("{dense} (exact)"), Box::new(Dense::new(exact.clone(), embedder.clone()))),
        (format!("{dense} (hnsw)"), Box::new(Dense::new(hnsw.clone(), embedder.clone()))),
        (
            format!("{hybrid} (exact)"),
            Box::new(Hybrid::new(index.clone(), exact.clone(), embedder.clone(), Default::default())),
        ),
    ];
    let mut latency_ms = Vec::new();
    for (name, method) in &methods {
        let mut excl = Vec::new();
        let mut incl = Vec::new();
        for _ in 0..args.repeat {
            for (q, e) in queries.iter().zip(&embed_ms) {
                let start = Instant::now();
                std::hint::black_box(method.retrieve(q, args.k)?);
                let ms = start.elapsed().as_secs_f64() * 1e3;
                excl.push(ms);
                // bm25 needs no embedding; the others pay the measured query embedding.
                incl.push(if *name == bm25 { ms } else { ms + e });
            }
        }
        latency_ms.push(LatencyRow {
            method: name.to_string(),
            excluding_embedding: percentiles(excl),
            including_embedding: percentiles(incl),
        });
    }

    // HNSW's recall against exact search, so its speed is read with its accuracy.
    let mut overlap = 0usize;
    for q in &queries {
        let e = q.embedding.as_ref().expect("embedded above");
        let a = exact.search(e, args.k)?;
        let b = hnsw.search(e, args.k)?;
        overlap += a.iter().filter(|x| b.iter().any(|y| y.0 == x.0)).count();
    }
    let hnsw_recall_at_k = overlap as f64 / (queries.len() * args.k) as f64;

    // Peak memory of the engine itself, read before the bandwidth probe's buffer.
    let peak_rss_mb = peak_rss_mb();
    let big = vec![1.0f32; 128 << 20];
    let dram = read_bandwidth(&big);
    drop(big);
    let matrix = index.vectors().as_flat();
    let matrix_bw = read_bandwidth(matrix);
    let matrix_mb = (matrix.len() * 4) as f64 / 1e6;
    let bound_ms = matrix_mb / 1e3 / dram.max(matrix_bw) * 1e3;
    let exact_p50 = latency_ms[1].excluding_embedding.p50;
    let report = Report {
        passages: index.len(),
        threads: rayon::current_num_threads(),
        build,
        queries: queries.len(),
        k: args.k,
        latency_ms,
        query_embedding_ms,
        exact_vs_bandwidth: Bandwidth {
            matrix_mb,
            dram_gb_per_s: dram,
            matrix_read_gb_per_s: matrix_bw,
            bound_ms,
            exact_p50_ms: exact_p50,
            ratio_to_bound: exact_p50 / bound_ms,
        },
        hnsw_recall_at_k,
        index_bytes: stats.bytes_on_disk,
        peak_rss_mb,
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print(&report);
    Ok(())
}

fn print(r: &Report) {
    let b = &r.build;
    println!("{} passages, {} threads", r.passages, r.threads);
    println!(
        "build {:.2}s: embedding {:.2}s ({:.0} passages/s), everything else {:.3}s = {:.2}% \
         (load {:.3}s, lexical {:.3}s, hnsw {:.3}s, write {:.3}s)",
        b.total_secs,
        b.embed_secs,
        b.passages_per_sec,
        b.rest_secs,
        b.rest_share * 100.0,
        b.load_secs,
        b.lexical_secs,
        b.hnsw_secs,
        b.write_secs
    );
    let header: Vec<String> =
        ["method", "p50 ms", "p99 ms", "p50 ms +embed", "p99 ms +embed"].iter().map(|s| s.to_string()).collect();
    let rows: Vec<Vec<String>> = r
        .latency_ms
        .iter()
        .map(|l| {
            vec![
                l.method.clone(),
                format!("{:.3}", l.excluding_embedding.p50),
                format!("{:.3}", l.excluding_embedding.p99),
                format!("{:.3}", l.including_embedding.p50),
                format!("{:.3}", l.including_embedding.p99),
            ]
        })
        .collect();
    println!("{} queries, k = {}", r.queries, r.k);
    println!("{}", table(&header, &rows));
    println!("query embedding: p50 {:.2} ms, p99 {:.2} ms", r.query_embedding_ms.p50, r.query_embedding_ms.p99);
    let bw = &r.exact_vs_bandwidth;
    println!(
        "exact search vs memory bandwidth: matrix {:.1} MB, DRAM {:.1} GB/s, matrix read {:.1} GB/s, \
         bound {:.3} ms, exact p50 {:.3} ms = {:.2}x the bound",
        bw.matrix_mb, bw.dram_gb_per_s, bw.matrix_read_gb_per_s, bw.bound_ms, bw.exact_p50_ms, bw.ratio_to_bound
    );
    println!("hnsw recall@{} vs exact: {:.3}", r.k, r.hnsw_recall_at_k);
    println!("index on disk: {:.1} MB; peak memory: {:.0} MB", r.index_bytes as f64 / 1e6, r.peak_rss_mb);
}
