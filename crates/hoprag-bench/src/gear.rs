//! `hoprag bench gear`: the LLM-free part of GEAR per query — diverse triple beam search
//! from the triples of k base passages (NaiveGE's start), breadth-first flattening to
//! passages and the RRF with the base list — on an index's triple graph or on a
//! synthetic one the size of GEAR's MuSiQue triple index (1.5 M triples). Sequence
//! scoring is `pooled` (cached per-triple embeddings); `--encode N` also times the
//! paper's `encode` scoring (the embedder on every candidate sequence) on N questions.
//!
//! Target: under 50 ms per query on 2 cores.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use hoprag::corpus::PassageIdx;
use hoprag::dataset::load_dataset;
use hoprag::embed::{l2_normalize, Embedder};
use hoprag::fusion::rrf;
use hoprag::graph::beam::{
    diverse_triple_beam_search, flatten_breadth_first, triples_to_passages, BeamParams, EncodeScorer, PooledScorer,
    SequenceScorer,
};
use hoprag::graph::{TripleGraph, TripleIndex};
use hoprag::index::{ExactIndex, HnswIndex, HnswParams, Matrix, VectorIndex};
use hoprag::retrieve::GearParams;
use hoprag::Engine;
use serde::Serialize;

use super::peak_rss_mb;
use super::{percentiles, Percentiles, Rng};
use crate::Context;

#[derive(Args)]
pub struct GearBench {
    /// Index whose entity graph's triples to search.
    #[arg(long, value_name = "DIR", conflicts_with = "triples")]
    index: Option<PathBuf>,
    /// Questions (with --index): each is embedded, its base list is the hybrid top k.
    /// Without it, queries are random passages' first triples.
    #[arg(long, value_name = "FILE", requires = "index")]
    dataset: Option<PathBuf>,
    /// A synthetic triple graph with this many triples instead (10 per passage, as many
    /// entities as triples, skewed entity frequencies, random 384-d unit vectors).
    #[arg(long)]
    triples: Option<usize>,
    /// Number of queries (at most the dataset's questions).
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Base passages per query, whose triples start the search.
    #[arg(short, default_value_t = 15)]
    k: usize,
    /// Also time `encode` scoring on this many queries (--index only).
    #[arg(long, default_value_t = 0)]
    encode: usize,
    /// Also build an HNSW graph over the triple vectors and time tripleLink through it
    /// (with its top-1 agreement with the exact scan).
    #[arg(long)]
    hnsw: bool,
}

#[derive(Serialize)]
struct Report {
    source: String,
    triples: usize,
    passages: usize,
    /// Time to build what the search reads (with --index: the whole triple index,
    /// BM25 side included; synthetic: adjacency only).
    build_ms: f64,
    queries: usize,
    k: usize,
    beam: BeamParams,
    threads: usize,
    /// Beam search + flattening + RRF, per query, pooled scoring.
    pooled_ms: Percentiles,
    mean_initial_triples: f64,
    mean_sequences_scored: f64,
    /// The same with `encode` scoring, where asked for.
    encode_ms: Option<Percentiles>,
    encode_queries: usize,
    /// One tripleLink (exact dense search for the nearest triple), per proximal triple.
    triple_link_ms: Percentiles,
    /// The same through HNSW, where asked for: build time, latency, and how often its
    /// top triple is the exact scan's.
    hnsw: Option<HnswReport>,
    peak_rss_mb: f64,
}

#[derive(Serialize)]
struct HnswReport {
    build_secs: f64,
    triple_link_ms: Percentiles,
    top1_agreement: f64,
}

/// One query of the workload: its embedding, text, and base list.
struct Work {
    query: Vec<f32>,
    base: Vec<(PassageIdx, f32)>,
}

pub fn run(ctx: &Context, args: GearBench) -> anyhow::Result<()> {
    let params = GearParams::default().beam();
    let mut rng = Rng(0x5eed_9ea2_0000_0001);
    let started = Instant::now();
    // The triples, and the embedder for encode scoring.
    let (source, triples, embedder, work): (String, Triples, Option<Arc<dyn Embedder>>, _) =
        match (&args.index, args.triples) {
            (Some(dir), _) => {
                let engine = Engine::open(hoprag::store::folder(dir), ctx.config.clone())?;
                let t = Instant::now();
                let graph = engine.graph()?;
                let load_ms = t.elapsed().as_secs_f64() * 1e3;
                let triples = graph.triple_index(engine.embedder.as_ref())?;
                let b = triples.build;
                ctx.note(format!(
                    "entity graph loaded in {load_ms:.0} ms; triple index of {} triples built in {:.0} ms (token \
                     counts {:.0}, adjacency {:.0}, in-memory BM25 {:.0})",
                    triples.graph.len(),
                    b.total_ms(),
                    b.token_counts_ms,
                    b.adjacency_ms,
                    b.bm25_ms
                ));
                let work = match &args.dataset {
                    Some(path) => {
                        let (_, mut questions) = load_dataset(path)?;
                        questions.truncate(args.queries);
                        let qs: Vec<String> = questions.iter().map(|q| q.text.clone()).collect();
                        let queries = engine.embed_queries(&qs, ctx.progress)?;
                        let hybrid = engine.retriever(hoprag::retrieve::hybrid::SPEC.name)?;
                        queries
                            .iter()
                            .map(|q| {
                                let base =
                                    hybrid.retrieve(q, args.k)?.hits.iter().map(|h| (h.passage, h.score)).collect();
                                let query = q.embedding.as_ref().expect("embedded above").to_vec();
                                Ok(Work { query, base })
                            })
                            .collect::<anyhow::Result<Vec<_>>>()?
                    }
                    None => random_work(&triples.graph, engine.index.len(), args.queries, args.k, &mut rng),
                };
                (dir.display().to_string(), Triples::Index(triples), Some(engine.embedder.clone()), work)
            }
            (None, Some(n)) => {
                let t = Instant::now();
                let graph = synthetic(n, &mut rng)?;
                ctx.note(format!("synthetic graph: {n} triples, generated in {:.1} s", t.elapsed().as_secs_f64()));
                let passages = n.div_ceil(10);
                let work = random_work(&graph, passages, args.queries, args.k, &mut rng);
                (format!("synthetic, {n} triples"), Triples::Synthetic(graph), None, work)
            }
            (None, None) => anyhow::bail!("give --index DIR (optionally --dataset FILE) or --triples N"),
        };
    let build_ms = started.elapsed().as_secs_f64() * 1e3;
    let graph = triples.graph();
    let passages = (0..graph.len() as u32).map(|t| graph.passage(t)).max().map_or(0, |p| p as usize + 1);

    let expand = |w: &Work, scorer: &dyn SequenceScorer| -> anyhow::Result<usize> {
        let initial: Vec<u32> = w.base.iter().flat_map(|&(p, _)| graph.passage_triples(p).iter().copied()).collect();
        let (beams, stats) = diverse_triple_beam_search(graph, &w.query, &initial, scorer, &params)?;
        let list: Vec<(PassageIdx, f32)> =
            triples_to_passages(graph, &flatten_breadth_first(&beams)).into_iter().map(|p| (p, 0.0)).collect();
        let mut fused = rrf(&[&list, &w.base], 60.0);
        fused.truncate(args.k);
        std::hint::black_box(fused);
        Ok(stats.scored)
    };

    // Warm-up, then timed.
    for w in work.iter().take(3) {
        expand(w, &PooledScorer { graph, query: &w.query })?;
    }
    let (mut times, mut scored, mut initial) = (Vec::new(), 0usize, 0usize);
    for w in &work {
        let t = Instant::now();
        scored += expand(w, &PooledScorer { graph, query: &w.query })?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        initial += w.base.iter().map(|&(p, _)| graph.passage_triples(p).len()).sum::<usize>();
    }

    let mut encode_times = Vec::new();
    if let (Some(embedder), Triples::Index(index)) = (&embedder, &triples) {
        let text = |t: u32| index.text(t).to_string();
        for w in work.iter().take(args.encode) {
            let scorer = EncodeScorer { graph, text: &text, embedder: embedder.as_ref(), query: &w.query };
            let t = Instant::now();
            expand(w, &scorer)?;
            encode_times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }

    // tripleLink: the nearest fact to a proximal triple's embedding, exact scan.
    let exact = ExactIndex::new(graph.vectors().clone());
    let mut link_times = Vec::new();
    let mut exact_top = Vec::new();
    for w in work.iter().take(50) {
        let t = Instant::now();
        let top = exact.search(&w.query, 1)?;
        link_times.push(t.elapsed().as_secs_f64() * 1e3);
        exact_top.push(top.first().map(|x| x.0));
    }
    let hnsw = if args.hnsw {
        let t = Instant::now();
        let index = HnswIndex::build(graph.vectors(), HnswParams::default())?;
        let build_secs = t.elapsed().as_secs_f64();
        let (mut times, mut agree) = (Vec::new(), 0usize);
        for (w, want) in work.iter().take(50).zip(&exact_top) {
            let t = Instant::now();
            let top = index.search(&w.query, 1)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            agree += usize::from(top.first().map(|x| x.0) == *want);
        }
        let n = times.len().max(1) as f64;
        Some(HnswReport { build_secs, triple_link_ms: percentiles(times), top1_agreement: agree as f64 / n })
    } else {
        None
    };

    let n = work.len().max(1) as f64;
    let report = Report {
        source,
        triples: graph.len(),
        passages,
        build_ms,
        queries: work.len(),
        k: args.k,
        beam: params,
        threads: rayon::current_num_threads(),
        pooled_ms: percentiles(times),
        mean_initial_triples: initial as f64 / n,
        mean_sequences_scored: scored as f64 / n,
        encode_queries: encode_times.len(),
        encode_ms: (!encode_times.is_empty()).then(|| percentiles(encode_times)),
        triple_link_ms: percentiles(link_times),
        hnsw,
        peak_rss_mb: peak_rss_mb(),
    };
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{}: {} triples, {} passages; {} queries, k = {}, b = {}, l = {}, {} neighbours, diversity {}",
            report.source,
            report.triples,
            report.passages,
            report.queries,
            report.k,
            params.beam_size,
            params.length,
            params.neighbours,
            params.diversity
        );
        println!(
            "beam search + fusion (pooled): p50 {:.2} ms, p99 {:.2} ms per query ({:.0} initial triples, {:.0} sequences \
             scored on average; target < 50 ms)",
            report.pooled_ms.p50, report.pooled_ms.p99, report.mean_initial_triples, report.mean_sequences_scored
        );
        if let Some(e) = report.encode_ms {
            println!(
                "beam search + fusion (encode, {} queries): p50 {:.0} ms, p99 {:.0} ms per query",
                report.encode_queries, e.p50, e.p99
            );
        }
        println!(
            "tripleLink (exact dense scan, {} threads): p50 {:.2} ms, p99 {:.2} ms per proximal triple",
            report.threads, report.triple_link_ms.p50, report.triple_link_ms.p99
        );
        if let Some(h) = &report.hnsw {
            println!(
                "tripleLink (HNSW, built in {:.0} s): p50 {:.3} ms, p99 {:.3} ms; same top triple as exact {:.1}%",
                h.build_secs,
                h.triple_link_ms.p50,
                h.triple_link_ms.p99,
                h.top1_agreement * 100.0
            );
        }
        println!("setup {:.0} ms; peak memory {:.0} MB", report.build_ms, report.peak_rss_mb);
    }
    Ok(())
}

/// What the search runs on: an index's triple index (shared, with its texts) or a
/// synthetic graph.
enum Triples {
    Index(Arc<TripleIndex>),
    Synthetic(TripleGraph),
}

impl Triples {
    fn graph(&self) -> &TripleGraph {
        match self {
            Triples::Index(t) => &t.graph,
            Triples::Synthetic(g) => g,
        }
    }
}

/// Queries for random passages: the query is the passage's first triple's vector, the
/// base list that passage and k − 1 others.
fn random_work(graph: &TripleGraph, passages: usize, queries: usize, k: usize, rng: &mut Rng) -> Vec<Work> {
    (0..queries)
        .filter_map(|_| {
            let p = (0..20).map(|_| rng.below(passages)).find(|&p| !graph.passage_triples(p).is_empty())?;
            let query = graph.vector(graph.passage_triples(p)[0]).to_vec();
            let mut base = vec![(p, 1.0)];
            base.extend((1..k).map(|i| (rng.below(passages), 1.0 / (i + 1) as f32)));
            Some(Work { query, base })
        })
        .collect()
}

/// `n` triples, 10 per passage; each passage has a topic entity that heads 60% of its
/// triples; other ends are drawn from n entities with P(id < x) = sqrt(x / n) (a few
/// hub entities, as real entity graphs have); 384-d random unit vectors; 8–15 tokens
/// per triple (musique-train's triples average 7.2 words).
fn synthetic(n: usize, rng: &mut Rng) -> anyhow::Result<TripleGraph> {
    const DIM: usize = 384;
    let entities = n.max(1);
    let skewed = |rng: &mut Rng| ((entities as f64 * rng.unit().powi(2)) as usize).min(entities - 1) as u32;
    let mut passages = Vec::with_capacity(n);
    let mut ends = Vec::with_capacity(n);
    let mut topic = 0;
    for t in 0..n {
        if t % 10 == 0 {
            topic = skewed(rng);
        }
        let head = if rng.unit() < 0.6 { topic } else { skewed(rng) };
        passages.push((t / 10) as PassageIdx);
        ends.push([Some(head), Some(skewed(rng))]);
    }
    let mut data = vec![0f32; n * DIM];
    for row in data.chunks_exact_mut(DIM) {
        row.iter_mut().for_each(|x| *x = (rng.unit() * 2.0 - 1.0) as f32);
        l2_normalize(row);
    }
    let weights = (0..n).map(|_| 8.0 + rng.below(8) as f32).collect();
    let vectors = Arc::new(Matrix::from_flat(DIM, data));
    Ok(TripleGraph::new(passages, ends, entities, n.div_ceil(10), vectors, (0..n as u32).collect(), weights)?)
}
