//! `hoprag bench query`: end-to-end latency of one method's queries, one at a time as a
//! user would send them (the question's embedding included), and where the time goes,
//! from the steps of each query's trace.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use hoprag::dataset::load_dataset;
use hoprag::retrieve::registry::{self, TraceKind};
use hoprag::retrieve::Query;
use hoprag::Engine;
use serde::Serialize;

use super::{percentiles, quantile, Percentiles};
use crate::Context;

#[derive(Args)]
pub struct QueryBench {
    /// Index to query.
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Questions to ask (any dataset format; gold is not used).
    #[arg(long, value_name = "FILE")]
    dataset: PathBuf,
    /// Method (a spec such as `ppr` or `phasegraph[dk=20]`).
    #[arg(long, default_value = hoprag::retrieve::DEFAULT_METHOD)]
    method: String,
    /// Passages per query.
    #[arg(short, long, default_value_t = 5)]
    k: usize,
    /// Timed passes over the questions (after one untimed warm-up pass).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
}

#[derive(Serialize)]
struct Report {
    method: String,
    /// What `auto` ran, when the method is `auto`.
    ran: Option<String>,
    questions: usize,
    repeat: usize,
    k: usize,
    /// Wall time of `retrieve`, question text in, passages out.
    total_ms: Percentiles,
    total_p90_ms: f64,
    mean_ms: f64,
    /// Seconds to load the graph and run its query-time precomputation, before timing.
    prepare_s: f64,
    /// Per traced step: its p50 and p99, and its share of the summed time.
    steps: Vec<Step>,
}

#[derive(Serialize)]
struct Step {
    name: String,
    ms: Percentiles,
    mean_ms: f64,
    share: f64,
    /// Queries that ran the step.
    runs: usize,
}

pub fn run(ctx: &Context, args: QueryBench) -> anyhow::Result<()> {
    let engine = Engine::open(hoprag::store::folder(&args.index), ctx.config.clone())?;
    let (_, questions) = load_dataset(&args.dataset)?;
    let retriever = engine.retriever(&args.method)?;
    let texts: Vec<String> = questions.iter().map(|q| q.text.clone()).collect();
    if texts.is_empty() {
        anyhow::bail!("{}: no questions", args.dataset.display());
    }
    // What the graph methods build in their first query is built first, and timed apart:
    // the passes measure the steady state.
    let prepared = Instant::now();
    engine.prepare()?;
    let prepare_s = prepared.elapsed().as_secs_f64();
    // Warm-up: the graph's query-time structures load on first use, caches fill.
    let mut ran = None;
    for t in &texts {
        let r = retriever.retrieve(&Query::new(t.clone()), args.k)?;
        if ran.is_none() && chooses(&args.method) {
            ran = r.trace.steps.first().and_then(|s| s.detail["method"].as_str().map(String::from));
        }
    }
    let mut total = Vec::new();
    // Steps in the order they first ran.
    let mut steps: Vec<(String, Vec<f64>)> = Vec::new();
    ctx.progress.start("querying", (texts.len() * args.repeat) as u64);
    for _ in 0..args.repeat {
        for t in &texts {
            let start = Instant::now();
            let r = retriever.retrieve(&Query::new(t.clone()), args.k)?;
            total.push(start.elapsed().as_secs_f64() * 1e3);
            for s in &r.trace.steps {
                let ms = s.micros as f64 / 1e3;
                match steps.iter_mut().find(|x| x.0 == s.name) {
                    Some(x) => x.1.push(ms),
                    None => steps.push((s.name.clone(), vec![ms])),
                }
            }
            ctx.progress.advance(1);
        }
    }
    ctx.progress.finish();
    let sum: f64 = total.iter().sum();
    let mean_ms = sum / total.len() as f64;
    let mut sorted = total.clone();
    sorted.sort_by(|a, b| hoprag::rank::asc(*a, *b));
    let total_p90_ms = quantile(&sorted, 0.9);
    let steps: Vec<Step> = steps
        .into_iter()
        .map(|(name, ms)| {
            let step_sum: f64 = ms.iter().sum();
            Step {
                name,
                mean_ms: step_sum / ms.len() as f64,
                share: step_sum / sum,
                runs: ms.len(),
                ms: percentiles(ms),
            }
        })
        .collect();
    let report = Report {
        method: args.method,
        ran,
        questions: texts.len(),
        repeat: args.repeat,
        k: args.k,
        total_ms: percentiles(total),
        total_p90_ms,
        mean_ms,
        prepare_s,
        steps,
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let ran = report.ran.as_deref().map(|m| format!(" (runs {m})")).unwrap_or_default();
    println!(
        "{}{ran}: {} questions × {} passes, k = {}, one query at a time",
        report.method, report.questions, report.repeat, report.k
    );
    if report.prepare_s >= 0.01 {
        println!(
            "(graph loaded and its query-time precomputation done in {:.1} s, before the warm-up pass)",
            report.prepare_s
        );
    }
    println!(
        "{:<28} p50 {:>8.2} ms   p90 {:>8.2} ms   p99 {:>8.2} ms   mean {:>8.2} ms",
        "end to end", report.total_ms.p50, report.total_p90_ms, report.total_ms.p99, report.mean_ms
    );
    for s in &report.steps {
        println!(
            "  {:<26} p50 {:>8.2} ms   p99 {:>8.2} ms   mean {:>8.2} ms   {:>5.1}% of the time",
            s.name,
            s.ms.p50,
            s.ms.p99,
            s.mean_ms,
            100.0 * s.share
        );
    }
    if report.steps.iter().map(|s| s.share).sum::<f64>() > 1.005 {
        println!("  (steps that run side by side, as ppr's dense scores and entity linking, add up to more than 100%)");
    }
    Ok(())
}

/// Whether a method spec names a method that runs another one it chooses (`auto`).
fn chooses(spec: &str) -> bool {
    let name = registry::parse_method_spec(spec).map_or(spec, |(name, _)| name);
    registry::find(name).is_some_and(|m| m.trace == TraceKind::Choice)
}
