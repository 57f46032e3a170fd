//! `hoprag bench edits`: how long one document's upsert or delete takes to reach every
//! method on a running server (issue 49's target: 300 ms p50, 1 s p99 at the 6,119
//! passages of 2wiki-corpus), through the path `hoprag serve` takes for an edit: the
//! edit from the served generation, the new generation loaded and readied with its walk
//! solved in the background, then the first query of every LLM-free method on it.
//!
//! It runs on a copy of the index (the original is never written): a cycle adds a
//! document, rewrites it, and deletes it, so the copy ends as it began.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use hoprag::corpus::Passage;
use hoprag::engine::Engine;
use hoprag::graph::TripleIndexBuild;
use hoprag::progress::Silent;
use hoprag::retrieve::Query;
use hoprag::store::edit::{EditOptions, EditWork, Request, WalkUpdate};
use serde::Serialize;

use super::{peak_rss_mb, Percentiles};
use crate::Context;

#[derive(Args)]
pub struct EditsBench {
    /// The index to measure on (copied first; never written).
    #[arg(long, value_name = "DIR")]
    index: PathBuf,
    /// Add-rewrite-delete cycles.
    #[arg(long, default_value_t = 5)]
    cycles: usize,
    /// Solve the walk before serving, as `hoprag add` does, instead of in the background.
    #[arg(long)]
    solve_walk: bool,
}

#[derive(Serialize, Default)]
struct Report {
    passages: usize,
    edits: usize,
    /// From the request to a generation served with the edit (edit, load, readying).
    visible_ms: Option<Percentiles>,
    /// `visible_ms` by kind.
    add_ms: Vec<f64>,
    update_ms: Vec<f64>,
    delete_ms: Vec<f64>,
    /// Where the time went, in ms, summed over all edits and divided by their number.
    mean: Breakdown,
    /// The first query of each LLM-free method right after an edit (median over edits):
    /// what the first question after an edit waits.
    first_query_ms: Vec<(String, f64)>,
    /// Edits after which some method did not return the added or rewritten passage in
    /// its top 10, or still returned a deleted one: "edit method".
    not_visible: Vec<String>,
    peak_rss_mb: f64,
}

#[derive(Serialize, Default)]
struct Breakdown {
    plan: f64,
    embed: f64,
    graph: f64,
    walk: f64,
    lexical: f64,
    write: f64,
    /// Loading the new generation (passages, vectors, graph).
    load: f64,
    /// Of `ready`: the graph loaded, with its query-time structures (PPR adjacency,
    /// linker).
    graph_load: f64,
    /// Graph structures, GEAR's triple index; the walk too with `--solve-walk`.
    ready: f64,
    /// Of `ready`: GEAR's triple index, by part.
    triple_index: TripleIndexBuild,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Add,
    Update,
    Delete,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Add => "add",
            Kind::Update => "update",
            Kind::Delete => "delete",
        }
    }
}

pub fn run(ctx: &Context, args: EditsBench) -> anyhow::Result<()> {
    let copy = tempfile::Builder::new().prefix("hoprag-bench-edits-").tempdir()?;
    let dir = copy.path().join("index");
    copy_tree(&args.index, &dir)?;
    let mut engine = Arc::new(Engine::open(hoprag::store::folder(&dir), ctx.config.clone())?);
    engine.prepare()?;
    let methods: Vec<String> = hoprag::retrieve::METHODS
        .iter()
        .filter(|m| !engine.uses_llm(m.name))
        .filter(|m| engine.retriever(m.name).is_ok())
        .map(|m| m.name.to_string())
        .collect();
    ctx.note(format!("{} passages; methods {}", engine.index.len(), methods.join(", ")));
    let template = engine.index.passages()[engine.index.len() / 2].clone();
    let walk = if args.solve_walk { WalkUpdate::Solve } else { WalkUpdate::Defer };
    let mut report = Report { passages: engine.index.len(), ..Default::default() };
    let mut firsts: Vec<Vec<f64>> = vec![Vec::new(); methods.len()];
    let mut sum = Breakdown::default();
    for cycle in 0..args.cycles {
        let id = format!("bench-edit-{cycle}");
        // A short passage of its own, so that every method (dense too) ranks it first for
        // the question below once it serves the edit.
        let title = format!("Trelkin Foundry {cycle}");
        let text = format!("Zorblat Quenneville{cycle} founded the Trelkin Foundry {cycle} beside {}.", template.title);
        let steps = [
            (Kind::Add, Request::Upsert(vec![Passage::new(id.clone(), title.clone(), text.clone())])),
            (
                Kind::Update,
                Request::Upsert(vec![Passage::new(id.clone(), title.clone(), format!("{text} It still casts bells."))]),
            ),
            (Kind::Delete, Request::Delete(vec![id.clone()])),
        ];
        for (kind, request) in steps {
            let started = Instant::now();
            let options = EditOptions { walk, source: "bench edits".into(), ..Default::default() };
            let edited = engine.edit(&request, &options, &Silent)?;
            let t = Instant::now();
            let next = Arc::new(engine.reload_after(&edited)?);
            let load = t.elapsed().as_secs_f64();
            let t = Instant::now();
            if next.graph_kind() != hoprag::retrieve::GraphKind::None {
                next.graph()?;
            }
            let graph_load = t.elapsed().as_secs_f64();
            if args.solve_walk {
                next.prepare()?;
            } else {
                next.prepare_walk_in_background()?;
            }
            let ready = t.elapsed().as_secs_f64();
            // Served: GEAR's triple index may still be building behind it (the first
            // naive_ge query waits for it, and its time counts there).
            let visible = started.elapsed().as_secs_f64() * 1e3;
            if let Ok(graph) = next.graph() {
                let built = graph.triple_index(next.embedder.as_ref())?.build;
                sum.triple_index.token_counts_ms += built.token_counts_ms;
                sum.triple_index.adjacency_ms += built.adjacency_ms;
                sum.triple_index.bm25_ms += built.bm25_ms;
            }
            engine.supersede();
            engine = next;
            add(&mut sum, &edited.work, load, ready);
            sum.graph_load += graph_load * 1e3;
            match kind {
                Kind::Add => report.add_ms.push(visible),
                Kind::Update => report.update_ms.push(visible),
                Kind::Delete => report.delete_ms.push(visible),
            }
            let question = format!("Who founded the Trelkin Foundry {cycle}?");
            for (m, name) in methods.iter().enumerate() {
                let t = Instant::now();
                let hits = engine.retriever(name)?.retrieve(&Query::new(question.clone()), 10)?.hits;
                firsts[m].push(t.elapsed().as_secs_f64() * 1e3);
                let found = hits.iter().any(|h| engine.index.passages()[h.passage as usize].id == id);
                if found == (kind == Kind::Delete) {
                    report.not_visible.push(format!("{} {name}", kind.name()));
                }
            }
            report.edits += 1;
        }
    }
    let n = report.edits.max(1) as f64;
    report.mean = Breakdown {
        plan: sum.plan / n,
        embed: sum.embed / n,
        graph: sum.graph / n,
        walk: sum.walk / n,
        lexical: sum.lexical / n,
        write: sum.write / n,
        load: sum.load / n,
        graph_load: sum.graph_load / n,
        ready: sum.ready / n,
        triple_index: TripleIndexBuild {
            token_counts_ms: sum.triple_index.token_counts_ms / n,
            adjacency_ms: sum.triple_index.adjacency_ms / n,
            bm25_ms: sum.triple_index.bm25_ms / n,
        },
    };
    let mut all: Vec<f64> = report.add_ms.iter().chain(&report.update_ms).chain(&report.delete_ms).copied().collect();
    report.visible_ms =
        (!all.is_empty()).then(|| Percentiles { p50: quantile(&mut all, 0.5), p99: quantile(&mut all, 0.99) });
    report.first_query_ms = methods.into_iter().zip(firsts).map(|(m, mut v)| (m, quantile(&mut v, 0.5))).collect();
    report.peak_rss_mb = peak_rss_mb();
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(())
}

fn add(sum: &mut Breakdown, work: &EditWork, load: f64, ready: f64) {
    sum.plan += work.plan_secs * 1e3;
    sum.embed += work.embed_secs * 1e3;
    sum.graph += work.graph_secs * 1e3;
    sum.walk += work.walk_secs * 1e3;
    sum.lexical += work.lexical_secs * 1e3;
    sum.write += work.write_secs * 1e3;
    sum.load += load * 1e3;
    sum.ready += ready * 1e3;
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn print_text(r: &Report) {
    let ms = |v: &[f64]| v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(" ");
    if let Some(p) = r.visible_ms {
        println!(
            "{} edits on {} passages: visible after p50 {:.0} ms, p99 {:.0} ms",
            r.edits, r.passages, p.p50, p.p99
        );
    }
    println!("add {} | update {} | delete {} (ms)", ms(&r.add_ms), ms(&r.update_ms), ms(&r.delete_ms));
    let b = &r.mean;
    println!(
        "mean ms: plan {:.0}, embed {:.0}, graph {:.0}, walk {:.0}, lexical {:.0}, write {:.0}, load {:.0}, \
         ready {:.0} (graph load {:.0}; triple index: token counts {:.0}, adjacency {:.0}, BM25 {:.0})",
        b.plan,
        b.embed,
        b.graph,
        b.walk,
        b.lexical,
        b.write,
        b.load,
        b.ready,
        b.graph_load,
        b.triple_index.token_counts_ms,
        b.triple_index.adjacency_ms,
        b.triple_index.bm25_ms
    );
    let firsts: Vec<String> = r.first_query_ms.iter().map(|(m, t)| format!("{m} {t:.0}")).collect();
    println!("first query after an edit (median ms): {}", firsts.join(", "));
    println!(
        "not visible to every method after {} edits: {}; peak memory {:.0} MB",
        r.not_visible.len(),
        r.not_visible.join(", "),
        r.peak_rss_mb
    );
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
