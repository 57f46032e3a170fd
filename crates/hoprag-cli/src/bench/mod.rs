//! `hoprag bench`: speed measurements, each against the peer its target is stated for,
//! measured in the same run.

mod graph;
mod index;
mod llm;
mod ppr;

use clap::{Args, Subcommand};

use crate::commands::Context;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand)]
enum BenchWhat {
    /// Index build and query latency on a corpus (vs memory bandwidth, exact vs HNSW).
    Index(index::IndexBench),
    /// Entity-graph build time and memory with heuristic triples.
    Graph(graph::GraphBench),
    /// Personalized PageRank latency (vs python-igraph's PRPACK on the same graph and seeds).
    Ppr(ppr::PprBench),
    /// Local GGUF chat model speed: prompt processing and generation tokens/s.
    Llm(llm::LlmBench),
}

pub fn run(ctx: &Context, args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchWhat::Index(a) => index::run(ctx, a),
        BenchWhat::Ppr(a) => ppr::run(ctx, a),
        BenchWhat::Graph(a) => graph::run(ctx, a),
        BenchWhat::Llm(a) => llm::run(ctx, a),
    }
}

/// p50 and p99 of a sample.
#[derive(serde::Serialize, Clone, Copy)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

pub fn percentiles(mut ms: Vec<f64>) -> Percentiles {
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((p * (ms.len() - 1) as f64).round() as usize).min(ms.len() - 1)];
    Percentiles { p50: at(0.5), p99: at(0.99) }
}
