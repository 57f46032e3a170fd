//! `hoprag bench router`: what RegimeRouter adds to a dense query: sentence selection,
//! features and routing, and the Union re-ranking of the pool, measured beside the
//! dense search and the B_rel embedding they come with (the target: under 1 ms on top
//! of the one extra embedding).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use hoprag::dataset::load_dataset;
use hoprag::embed::TextKind;
use hoprag::regime::{union_ranking, RegimeModel, RouterFeatures};
use hoprag::Engine;
use serde::Serialize;

use super::{percentiles, Percentiles};
use crate::Context;

#[derive(Args)]
pub struct RouterBench {
    /// Index to query.
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Questions to route (any dataset format; gold is not used).
    #[arg(long, value_name = "FILE")]
    dataset: PathBuf,
    /// Router model (default: the index's, else the built-in one).
    #[arg(long, value_name = "MODEL.json")]
    router: Option<PathBuf>,
    /// Timed repetitions of each question.
    #[arg(long, default_value_t = 20)]
    repeat: usize,
}

#[derive(Serialize)]
struct Report {
    questions: usize,
    repeat: usize,
    /// Selector + features + router, ms per query.
    route_ms: Percentiles,
    /// Union scoring and sorting of the 50-passage pool.
    union_rerank_ms: Percentiles,
    /// Both: what the method adds beyond the B_rel embedding.
    added_ms: Percentiles,
    /// For scale: the dense search of the pool and the B_rel embedding.
    dense_search_ms: Percentiles,
    embed_b_rel_ms: Percentiles,
}

pub fn run(ctx: &Context, args: RouterBench) -> anyhow::Result<()> {
    let engine = Engine::open(hoprag::store::folder(&args.index), ctx.config.clone())?;
    let model = RegimeModel::resolve(args.router.as_deref(), engine.store.folder())?;
    let (_, questions) = load_dataset(&args.dataset)?;
    let texts: Vec<String> = questions.iter().map(|q| q.text.clone()).collect();
    let queries = engine.embed_queries(&texts, ctx.progress)?;
    let vectors = engine.vectors();
    let pool_size = engine.config.methods.regime_router.pool;
    let (mut route, mut rerank, mut added, mut search, mut embed) = (vec![], vec![], vec![], vec![], vec![]);
    ctx.progress.start("routing", queries.len() as u64);
    for q in &queries {
        let e = q.embedding.as_ref().expect("embedded");
        let t = Instant::now();
        let pool = vectors.search(e, pool_size)?;
        search.push(t.elapsed().as_secs_f64() * 1e3);
        let bridge = &engine.index.passage(pool[0].0).text;
        let chosen = model.for_question(&q.text);
        let b_rel = chosen.classifiers.select(&q.text, bridge).map(|s| s.sentence).unwrap_or_default();
        let t = Instant::now();
        let b_vec = engine.embedder.embed_one(&b_rel, TextKind::Query)?;
        embed.push(t.elapsed().as_secs_f64() * 1e3);
        for _ in 0..args.repeat {
            let t = Instant::now();
            let chosen = model.for_question(&q.text);
            let s = chosen.classifiers.select(&q.text, bridge);
            let sentence = s.as_ref().map_or("", |s| s.sentence.as_str());
            let p = chosen.classifiers.route(&RouterFeatures::compute(&q.text, sentence, bridge));
            std::hint::black_box(p);
            let a = t.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            std::hint::black_box(union_ranking(&pool, &b_vec, 0.25, engine.index.vectors()));
            let b = t.elapsed().as_secs_f64() * 1e3;
            route.push(a);
            rerank.push(b);
            added.push(a + b);
        }
        ctx.progress.advance(1);
    }
    ctx.progress.finish();
    let report = Report {
        questions: queries.len(),
        repeat: args.repeat,
        route_ms: percentiles(route),
        union_rerank_ms: percentiles(rerank),
        added_ms: percentiles(added),
        dense_search_ms: percentiles(search),
        embed_b_rel_ms: percentiles(embed),
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let row = |name: &str, p: Percentiles| println!("{name:<28} p50 {:>8.4} ms   p99 {:>8.4} ms", p.p50, p.p99);
    println!("{} questions × {} repeats", report.questions, report.repeat);
    row("route (select+features+LR)", report.route_ms);
    row("union re-rank of the pool", report.union_rerank_ms);
    row("added by RegimeRouter", report.added_ms);
    row("for scale: dense pool search", report.dense_search_ms);
    row("for scale: embed B_rel", report.embed_b_rel_ms);
    Ok(())
}
