//! `hoprag bench`: speed measurements, each against the peer its target is stated for,
//! measured in the same run.
//!
//! A crate of its own above the library (the CLI's `bench` subcommand calls [`run`]), so
//! that the engine's layers do not see the benchmarks, their synthetic corpora and their
//! composed embedder (`scale/words.rs`). What a benchmark needs of the command line is
//! the [`Context`] the CLI hands in; [`output`] renders the tables of both.

mod bridge;
mod edits;
mod embed;
mod gear;
mod graph;
mod host;
mod index;
mod llm;
pub mod output;
mod ppr;
mod query;
mod router;
mod scale;

use clap::{Args, Subcommand};
use hoprag::progress::Progress;
use hoprag::Config;

/// What a benchmark gets from the command line's global flags.
pub struct Context<'a> {
    /// `--json`: the report is printed as JSON, and no status lines are.
    pub json: bool,
    /// The configuration of commands without an index (defaults, `--config`, the
    /// environment, the flags).
    pub config: &'a Config,
    /// Progress bars on stderr (hidden with --quiet, --json or off a terminal).
    pub progress: &'a dyn Progress,
}

impl Context<'_> {
    /// Prints a status line on stderr unless output is JSON.
    pub fn note(&self, line: impl AsRef<str>) {
        if !self.json {
            eprintln!("{}", line.as_ref());
        }
    }
}

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
    /// Embedder throughput (passages/s) and query latency, vs sentence-transformers with `--peer`.
    Embed(embed::EmbedBench),
    /// Index build and query latency on a corpus (vs memory bandwidth, exact vs HNSW).
    Index(index::IndexBench),
    /// One document's upsert or delete on a served index: until every method sees it,
    /// and where the time goes (run on a copy of the index).
    Edits(edits::EditsBench),
    /// Entity-graph build time and memory with heuristic triples.
    Graph(graph::GraphBench),
    /// BridgeRAG's non-LLM query part (6 searches, pool, PIT fusion) with canned LLM answers.
    Bridge(bridge::BridgeBench),
    /// A method's end-to-end query latency (question embedding included) and where the
    /// time goes, step by step.
    Query(query::QueryBench),
    /// Personalized PageRank latency (vs python-igraph's PRPACK on the same graph and seeds).
    Ppr(ppr::PprBench),
    /// What RegimeRouter adds to a dense query (selector, router, Union re-ranking).
    Router(router::RouterBench),
    /// GEAR's LLM-free part: diverse triple beam search and fusion per query, on an
    /// index's triple graph or a synthetic one of GEAR's MuSiQue size.
    Gear(gear::GearBench),
    /// The engine on N passages recombined from the 2wiki sentences, embedded from cached
    /// MiniLM word vectors: build time and size, memory, HNSW recall, query latency.
    Scale(scale::ScaleBench),
    /// Local GGUF chat model speed: prompt processing and generation tokens/s.
    Llm(llm::LlmBench),
    /// What one core of this machine gives now (multiply-adds, re-read speed by buffer
    /// size), to read a latency beside.
    Host(host::HostBench),
}

pub fn run(ctx: &Context, args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchWhat::Embed(a) => embed::run(ctx, a),
        BenchWhat::Index(a) => index::run(ctx, a),
        BenchWhat::Ppr(a) => ppr::run(ctx, a),
        BenchWhat::Query(a) => query::run(ctx, a),
        BenchWhat::Graph(a) => graph::run(ctx, a),
        BenchWhat::Edits(a) => edits::run(ctx, a),
        BenchWhat::Router(a) => router::run(ctx, a),
        BenchWhat::Bridge(a) => bridge::run(ctx, a),
        BenchWhat::Gear(a) => gear::run(ctx, a),
        BenchWhat::Llm(a) => llm::run(ctx, a),
        BenchWhat::Scale(a) => scale::run(ctx, a),
        BenchWhat::Host(a) => host::run(ctx, a),
    }
}

/// p50 and p99 of a sample.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

/// A memory figure of this process from /proc/self/status (`VmHWM`, `VmRSS`; Linux), in
/// MiB; `None` where it cannot be read.
pub fn proc_status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// This process's peak resident memory in MiB (0 where it cannot be read).
pub fn peak_rss_mb() -> f64 {
    proc_status_mib("VmHWM").unwrap_or(0.0)
}

/// This process's resident memory now, in MiB (0 where it cannot be read).
pub fn rss_mb() -> f64 {
    proc_status_mib("VmRSS").unwrap_or(0.0)
}

pub fn percentiles(mut ms: Vec<f64>) -> Percentiles {
    ms.sort_by(|a, b| hoprag::rank::asc(*a, *b));
    Percentiles { p50: quantile(&ms, 0.5), p99: quantile(&ms, 0.99) }
}

/// The value at fraction `p` of a sorted, non-empty sample (the nearest rank).
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    sorted[((p * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)]
}

/// xorshift64*: a deterministic generator so runs and peers see the same inputs.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> u32 {
        (self.next() % n as u64) as u32
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
