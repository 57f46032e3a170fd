//! `hoprag bench ppr`: Personalized PageRank latency on an index's entity graph or a
//! synthetic graph, next to python-igraph's `personalized_pagerank` (PRPACK, what
//! HippoRAG calls) on the same graph and seeds, with top-10 agreement as a check that
//! both compute the same thing.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use clap::Args;
use hoprag::graph::ppr::{PprGraph, PprParams};
use serde::Serialize;

use super::{percentiles, Percentiles, Rng};
use crate::Context;

#[derive(Args)]
pub struct PprBench {
    /// Index whose entity graph to use.
    #[arg(long, value_name = "DIR", conflicts_with = "edges")]
    index: Option<PathBuf>,
    /// Synthetic graph with this many undirected edges instead (nodes = edges / 5).
    #[arg(long)]
    edges: Option<usize>,
    /// Number of queries (each seeded with 3 random nodes).
    #[arg(long, default_value_t = 50)]
    queries: usize,
    /// Python interpreter with igraph installed (`pip install igraph`); the peer is
    /// skipped if it cannot be run.
    #[arg(long, default_value = "python3")]
    python: String,
}

#[derive(Serialize)]
struct Report {
    nodes: usize,
    edges: usize,
    queries: usize,
    damping: f64,
    hoprag_ms: Percentiles,
    mean_iterations: f64,
    igraph_ms: Option<Percentiles>,
    /// igraph p50 / hoprag p50.
    speedup_p50: Option<f64>,
    /// Mean overlap of the two top-10 node lists.
    top10_agreement: Option<f64>,
    build_ms: f64,
}

pub fn run(ctx: &Context, args: PprBench) -> anyhow::Result<()> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (n, edges, seed_pool): (usize, Vec<(u32, u32, f32)>, usize) = match (&args.index, args.edges) {
        (Some(dir), _) => {
            let store = hoprag::store::folder(dir);
            let index = store.load()?;
            let g = hoprag::store::load_graph_of(store.as_ref(), &index, &Default::default())?.ok_or_else(|| {
                anyhow::anyhow!("{} has no entity graph; build one with `hoprag graph`", dir.display())
            })?;
            let e = g.entities.len() as u32;
            let mut edges: Vec<(u32, u32, f32)> = g.edges.iter().map(|x| (x.a, x.b, x.weight)).collect();
            for (p, ents) in g.passage_entities.iter().enumerate() {
                edges.extend(ents.iter().map(|&x| (e + p as u32, x, 1.0)));
            }
            (g.entities.len() + g.passage_entities.len(), edges, g.entities.len())
        }
        (None, Some(m)) => {
            // Half the endpoints uniform, half drawn from a small hub set: a skewed degree
            // distribution like real entity graphs.
            let n = (m / 5).max(2);
            let hubs = (n / 100).max(1);
            let edges = (0..m)
                .map(|_| {
                    let a = rng.below(n);
                    let b = if rng.next().is_multiple_of(2) { rng.below(hubs) } else { rng.below(n) };
                    (a, b, 1.0 + (rng.next() % 3) as f32)
                })
                .collect();
            (n, edges, n)
        }
        (None, None) => anyhow::bail!("give --index DIR or --edges N"),
    };
    let t = Instant::now();
    let graph = PprGraph::from_edges(n, &edges);
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let seeds: Vec<Vec<(u32, f64)>> =
        (0..args.queries).map(|_| (0..3).map(|_| (rng.below(seed_pool), 1.0)).collect()).collect();
    let params = PprParams::default();

    // One warm-up run, then the timed ones.
    graph.personalized_pagerank(&seeds[0], &params);
    let mut times = Vec::new();
    let mut iterations = 0usize;
    let mut tops = Vec::new();
    for s in &seeds {
        let t = Instant::now();
        let r = graph.personalized_pagerank(s, &params);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        iterations += r.iterations;
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by(|a, b| hoprag::rank::desc(r.scores[*a as usize], r.scores[*b as usize]).then(a.cmp(b)));
        order.truncate(10);
        tops.push(order);
    }

    let peer = run_igraph(&args.python, n, &edges, &seeds, params.damping);
    let (igraph_ms, top10_agreement) = match peer {
        Ok((t, their_tops)) => {
            let agree = tops
                .iter()
                .zip(&their_tops)
                .map(|(a, b)| a.iter().filter(|x| b.contains(x)).count() as f64 / 10.0)
                .sum::<f64>()
                / tops.len() as f64;
            (Some(percentiles(t)), Some(agree))
        }
        Err(e) => {
            ctx.note(format!("igraph peer skipped: {e}"));
            (None, None)
        }
    };
    let hoprag_ms = percentiles(times);
    let report = Report {
        nodes: n,
        edges: graph.edges(),
        queries: seeds.len(),
        damping: params.damping,
        speedup_p50: igraph_ms.map(|p| p.p50 / hoprag_ms.p50),
        hoprag_ms,
        mean_iterations: iterations as f64 / seeds.len() as f64,
        igraph_ms,
        top10_agreement,
        build_ms,
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} nodes, {} edges, {} queries, damping {}: hoprag p50 {:.2} ms p99 {:.2} ms ({:.1} iterations); \
             graph build {:.1} ms",
            report.nodes,
            report.edges,
            report.queries,
            report.damping,
            report.hoprag_ms.p50,
            report.hoprag_ms.p99,
            report.mean_iterations,
            report.build_ms
        );
        if let (Some(p), Some(s), Some(a)) = (report.igraph_ms, report.speedup_p50, report.top10_agreement) {
            println!(
                "igraph (prpack) p50 {:.2} ms p99 {:.2} ms: hoprag is {:.1}x faster at p50; top-10 agreement {:.3}",
                p.p50, p.p99, s, a
            );
        }
    }
    Ok(())
}

type PeerResult = (Vec<f64>, Vec<Vec<u32>>);

fn run_igraph(
    python: &str,
    n: usize,
    edges: &[(u32, u32, f32)],
    seeds: &[Vec<(u32, f64)>],
    damping: f64,
) -> anyhow::Result<PeerResult> {
    let dir = tempfile::tempdir()?;
    let (edges_path, seeds_path, out_path) =
        (dir.path().join("edges.tsv"), dir.path().join("seeds.json"), dir.path().join("out.json"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&edges_path)?);
    writeln!(f, "{n}")?;
    for (a, b, w) in edges {
        writeln!(f, "{a} {b} {w}")?;
    }
    f.flush()?;
    std::fs::write(&seeds_path, serde_json::to_vec(seeds)?)?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/ppr_igraph.py");
    let out = Command::new(python)
        .arg(script)
        .arg(&edges_path)
        .arg(&seeds_path)
        .arg(damping.to_string())
        .arg(&out_path)
        .output()?;
    if !out.status.success() {
        anyhow::bail!("{}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed"));
    }
    #[derive(serde::Deserialize)]
    struct Out {
        times_ms: Vec<f64>,
        top10: Vec<Vec<u32>>,
    }
    let o: Out = serde_json::from_slice(&std::fs::read(&out_path)?)?;
    Ok((o.times_ms, o.top10))
}
