//! `hoprag bench scale`: the engine on corpora far larger than the real subsets.
//!
//! The corpus is recombined from the sentences of the real 2WikiMultiHopQA passages
//! ([`corpus`]), and every text is embedded by composing cached MiniLM word vectors
//! ([`words`]), so that building a million-passage index spends its time in the engine:
//! the lexical index, the HNSW graph, the writes and the heuristic entity graph. The
//! questions are the real MuSiQue and HotpotQA questions of the shared data.
//!
//! The queries are measured in a child process (`--index`, on the index just built), so
//! that its memory figures are those of a process that only opens and queries the index,
//! not one that still holds what the build freed.
//!
//! Every place that builds or opens an index is one of [`build_index`] and
//! [`open_index`]: the store seam.

mod against;
mod corpus;
mod edits;
mod filtered;
mod print;
mod words;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use hoprag::corpus::{load_corpus, CorpusOptions, LoadedCorpus, Passage};
use hoprag::dataset::load_dataset;
use hoprag::embed::composed::{ComposedEmbedder, Coverage, Vocabulary};
use hoprag::embed::{Embedder, TextKind};
use hoprag::graph::walk::WALK_STEP;
use hoprag::graph::{extract_heuristic, EntityGraph, GraphOptions, GraphStats};
use hoprag::index::{HnswParams, Index, Quantization, VectorIndex, VectorIndexKind};
use hoprag::progress::Progress;
use hoprag::retrieve::registry::{self, GraphUse, MethodSpec};
use hoprag::retrieve::{auto, bm25, dense, hybrid, phasegraph, ppr, Query, Retriever};
use hoprag::store::{self, dir_size, BuildOptions, Store};
use hoprag::{Config, Engine};
use serde::{Deserialize, Serialize};

use self::corpus::{generate, Sources};
use self::words::word_vectors;
use super::{peak_rss_mb, percentiles, rss_mb, Percentiles};
use crate::output::table;
use crate::Context;

#[derive(Args)]
pub struct ScaleBench {
    /// Passages to generate (at least 1,000).
    #[arg(long, default_value_t = 100_000, value_parser = at_least_1000)]
    passages: usize,
    /// Where to build the index: a folder (must not hold one) or a PostgreSQL URL
    /// (`postgres://USER@HOST:PORT/DB?schema=NAME`; an index there is replaced), kept
    /// afterwards; by default a new folder under the cache (~/.cache/hoprag/scale),
    /// removed at the end unless --keep.
    #[arg(long, alias = "store", value_name = "DIR|URL")]
    out: Option<String>,
    /// Keep the index built (its folder is printed).
    #[arg(long)]
    keep: bool,
    /// Seed of the corpus generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Timed passes over the questions per method (after one untimed warm-up pass).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Passages per query.
    #[arg(short, default_value_t = 10)]
    k: usize,
    /// The shared data folder: 2wiki-corpus/corpus.json (sentences and vocabulary),
    /// musique-train/ and hotpotqa-train/questions.json (queries).
    #[arg(long, value_name = "DIR", default_value = "../shared/data")]
    data: PathBuf,
    /// Only measure the queries, on an index an earlier run built (with --keep): the
    /// build is skipped.
    #[arg(long, value_name = "DIR|URL", conflicts_with_all = ["out", "keep"])]
    index: Option<String>,
    /// Build no entity graph (and time no ppr): its triple vectors are what outgrows
    /// memory first (see docs/scale.md).
    #[arg(long, conflicts_with = "index")]
    no_graph: bool,
    /// Add the heuristic graph to the index that an earlier `--no-graph` run of the same
    /// --passages and --seed built in --out, instead of building the index again (the
    /// corpus is generated again and must match the stored one), then measure the
    /// queries: a large run in two sittings.
    #[arg(long, requires = "out", conflicts_with_all = ["no_graph", "index", "keep"])]
    add_graph: bool,
    /// Instead of the benchmark, compare the composed vectors with MiniLM's own on the
    /// passages of this MiniLM index (e.g. one of the 2wiki corpus): random pairs'
    /// cosines and shared nearest neighbours.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "keep", "index"])]
    against: Option<PathBuf>,
    /// Questions (evenly spaced) on which ppr's split walk is compared with the full
    /// walk (`ppr.split = false`): top-k overlap, identical lists, the full walk's time.
    /// 0: all of them.
    #[arg(long, default_value_t = 0, value_name = "N")]
    agreement: usize,
    /// How the HNSW graph stores its copy of the vectors (see `hoprag index`).
    #[arg(long, default_value = "i8", value_name = "i8|f32")]
    hnsw_quantization: Quantization,
    /// Time only this many of the 102 questions, evenly spaced (0: all): at a million
    /// passages a method whose queries fall back to the full walk takes seconds each.
    #[arg(long, default_value_t = 0, value_name = "N")]
    questions: usize,
    /// The graph methods' `ppr.split_budget` (edge steps of the push before an unproven
    /// ranking); by default the configuration's.
    #[arg(long, value_name = "STEPS")]
    split_budget: Option<usize>,
    /// Time only these methods (comma-separated: bm25, dense, hybrid, ppr, auto,
    /// phasegraph; `dense` is both the HNSW and the exact search); by default all. With
    /// --edits: the methods the query clients run (any LLM-free method; by default every
    /// one the index supports).
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = clap::builder::PossibleValuesParser::new(hoprag::retrieve::METHODS.iter().map(|m| m.name)))]
    methods: Vec<String>,
    /// Also write the JSON report to this file (whatever the output format).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Also time each method under metadata filters admitting 10 % and 1 % of the
    /// passages, beside it unfiltered, on the first N questions (0: off).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub filtered: usize,
    /// Instead of timing the queries, apply a stream of N document edits (adds, changes,
    /// deletes) to the index (--index: edited in place, so give it a copy; or the one
    /// built), as `hoprag serve` applies them, while two query clients run every
    /// LLM-free method: each edit's time, I/O, store size and visibility, and the
    /// methods' latency during and after the stream (docs/scale.md).
    #[arg(long, default_value_t = 0, value_name = "N")]
    edits: usize,
    /// Edits requested per second (0: back to back).
    #[arg(long, default_value_t = 1.0, value_name = "PER_SEC", requires = "edits")]
    edit_rate: f64,
    /// After the stream, wait at most this long for the last edit's walk (solved in the
    /// background) before timing the queries again.
    #[arg(long, default_value_t = 900, value_name = "SECS", requires = "edits")]
    settle_secs: u64,
    /// After the stream, queries per client (0: every method on every question once,
    /// between the two clients) ...
    #[arg(long, default_value_t = 0, value_name = "N", requires = "edits")]
    after_queries: usize,
    /// ... within this many seconds.
    #[arg(long, default_value_t = 300, value_name = "SECS", requires = "edits")]
    after_secs: u64,
}

fn at_least_1000(s: &str) -> Result<usize, String> {
    let n: usize = s.replace(['_', ','], "").parse().map_err(|e| format!("{s:?}: {e}"))?;
    if n < 1000 {
        return Err(format!("{n} passages: the scale benchmark needs at least 1000"));
    }
    Ok(n)
}

/// The inputs every run needs: source sentences, questions, the composed embedder.
struct Inputs {
    sources: Sources,
    questions: Vec<String>,
    embedder: Arc<ComposedEmbedder>,
    vocabulary_words: usize,
    words_cached: bool,
    words_secs: f64,
}

/// `bare_id`: the embedder answers to the bare id ([`words::records_bare_id`]).
fn inputs(ctx: &Context, data: &Path, bare_id: bool) -> anyhow::Result<Inputs> {
    let corpus_path = data.join("2wiki-corpus/corpus.json");
    let source = load_corpus(&corpus_path, &CorpusOptions::default())
        .context("reading the source passages (the shared data folder is --data)")?;
    let mut questions = Vec::new();
    for name in ["musique-train", "hotpotqa-train"] {
        let path = data.join(name).join("questions.json");
        let (_, q) = load_dataset(&path).context("reading the questions (the shared data folder is --data)")?;
        questions.extend(q.into_iter().map(|q| q.text));
    }
    let texts: Vec<String> = source.passages.iter().map(Passage::index_text).collect();
    let vocabulary = Vocabulary::new(texts.iter().map(String::as_str), questions.iter().map(String::as_str));
    let t = Instant::now();
    let (dim, vectors, words_cached) =
        word_vectors(&vocabulary, &words::cache_dir(), &ctx.config.embedder, ctx.progress)?;
    let words_secs = t.elapsed().as_secs_f64();
    let embedder = ComposedEmbedder::new(&vocabulary, dim, vectors)?;
    let embedder = Arc::new(if bare_id { embedder.with_bare_id() } else { embedder });
    Ok(Inputs {
        sources: Sources::new(&source.passages),
        questions,
        embedder,
        vocabulary_words: vocabulary.words.len(),
        words_cached,
        words_secs,
    })
}

#[derive(Serialize)]
struct Report {
    passages: usize,
    seed: u64,
    threads: usize,
    source: SourceReport,
    build: BuildReport,
    /// Peak resident memory of the building process (corpus generation, index and
    /// graph build, all in one process), read when the build is done.
    build_peak_rss_mb: f64,
    /// The queries timed on the index built; `None` with --edits.
    #[serde(skip_serializing_if = "Option::is_none")]
    queries: Option<QueryReport>,
    /// The edit stream on the index built (--edits).
    #[serde(skip_serializing_if = "Option::is_none")]
    edits: Option<edits::EditsReport>,
}

#[derive(Serialize)]
struct SourceReport {
    passages: usize,
    sentences: usize,
    /// Source passages without a sentence (not used).
    empty_passages: usize,
    vocabulary_words: usize,
    /// Whether the word vectors came from the cache (else MiniLM embedded them now).
    word_vectors_cached: bool,
    word_vectors_secs: f64,
    generate_secs: f64,
    /// Compositions drawn again because they equalled an earlier passage.
    duplicates_redrawn: usize,
    /// Passages given up after repeated duplicates (the corpus is that much smaller).
    duplicates_dropped: usize,
}

/// Where a build's time went; everything but `embed_secs` is the engine.
#[derive(Serialize, Default)]
struct BuildReport {
    /// The composed embedder (passages, entities, triples): excluded from the totals.
    embed_secs: f64,
    lexical_secs: f64,
    hnsw_secs: f64,
    /// Passages, vectors, manifest written and the generation published.
    index_write_secs: f64,
    /// Heuristic triples and entities from the passages.
    graph_extract_secs: f64,
    /// Entity nodes, edges, synonym links (an HNSW search over the entities), components.
    graph_structure_secs: f64,
    /// The passage seeds' walk solved for the split walk (graph::split_ppr), stored with
    /// the graph; 0 where the graph is not one the split covers.
    graph_walk_secs: f64,
    /// The graph saved and attached as a new generation.
    graph_write_secs: f64,
    index_secs_excluding_embedding: f64,
    graph_secs_excluding_embedding: f64,
    total_secs_excluding_embedding: f64,
    index_bytes: u64,
    /// False when the graph was added to an index built by an earlier run (--add-graph):
    /// the index figures are then that run's.
    index_built: bool,
    graph: Option<GraphStats>,
    embedder: Coverage,
}

#[derive(Serialize, Deserialize)]
struct QueryReport {
    questions: usize,
    repeat: usize,
    k: usize,
    /// Bytes of the live generation, graph included.
    disk_bytes: u64,
    /// The graph's files (folder stores only).
    graph_bytes: Option<u64>,
    open_secs: f64,
    /// Graph read and its query-time structures (linker, PPR adjacency) built.
    graph_load_secs: f64,
    /// Resident memory of the querying process after the index and graph are open.
    rss_after_open_mb: f64,
    /// Of it, pages of mapped files (the vector files, tantivy's segments): the kernel
    /// shares them with its page cache and may drop them under pressure.
    #[serde(default)]
    rss_file_after_open_mb: f64,
    /// Resident memory and mapped-file pages after the last query.
    #[serde(default)]
    rss_at_end_mb: f64,
    #[serde(default)]
    rss_file_at_end_mb: f64,
    /// Its peak, after every query.
    peak_rss_mb: f64,
    hnsw_recall_at_k: f64,
    /// HNSW's recall@k and latency (one pass after a warm-up) by search breadth.
    #[serde(default)]
    hnsw_breadths: Vec<Breadth>,
    latency_ms: Vec<Latency>,
    /// Each method under metadata filters (`--filtered N`).
    #[serde(default)]
    filtered: Vec<filtered::FilteredLatency>,
    /// ppr queries for which no entity could be seeded (answered by dense retrieval).
    ppr_dense_fallbacks: usize,
    /// The split walk's precomputation (graph::split_ppr), done after the graph loads.
    #[serde(default)]
    ppr_precompute: Option<hoprag::graph::split_ppr::ResponseStats>,
    /// Resident memory once it is done.
    #[serde(default)]
    rss_after_precompute_mb: f64,
    /// Timed ppr queries whose split walk did not prove its ranking (the full walk ran).
    #[serde(default)]
    ppr_split_fallbacks: usize,
    /// The split walk against the full walk, per method that runs it.
    #[serde(default)]
    agreement: Vec<Agreement>,
    unknown_query_words: u64,
}

#[derive(Serialize, Deserialize)]
struct Breadth {
    breadth: usize,
    /// The breadth the index searches with by default.
    default: bool,
    recall_at_k: f64,
    ms: Percentiles,
}

/// A graph method as it runs (the split walk) against the same method with the full walk.
#[derive(Serialize, Deserialize)]
struct Agreement {
    method: String,
    questions: usize,
    /// Mean share of the full walk's top k that the split walk returns.
    top_k_overlap: f64,
    /// Questions whose k passages came back identical, in the same order.
    identical: usize,
    /// The full walk's latency on those questions (one pass, after a warm-up question).
    full_walk_ms: Percentiles,
}

#[derive(Serialize, Deserialize)]
struct Latency {
    method: String,
    ms: Percentiles,
    mean_ms: f64,
    /// Timed queries whose split walk did not prove its ranking, so that the full walk
    /// ran after it (graph methods).
    #[serde(default)]
    split_fallbacks: usize,
    /// Timed queries whose split walk ran out of its budget and ranked by its estimates,
    /// unproven (`ppr.split_budget`).
    #[serde(default)]
    split_unproven: usize,
    /// Mean milliseconds per query in each step of the method's trace (steps that run
    /// side by side overlap).
    #[serde(default)]
    steps: Vec<(String, f64)>,
}

pub fn run(ctx: &Context, args: ScaleBench) -> anyhow::Result<()> {
    let existing = args.index.as_ref().or(args.out.as_ref().filter(|_| args.add_graph));
    let bare_id = existing.map(|spec| words::records_bare_id(spec)).transpose()?.unwrap_or(false);
    let mut inputs = inputs(ctx, &args.data, bare_id)?;
    // After the vocabulary (all questions' words) is fixed: the word vectors' cache key.
    let kept = sample(inputs.questions.len(), args.questions);
    inputs.questions = kept.into_iter().map(|i| inputs.questions[i].clone()).collect();
    if let Some(dir) = &args.against {
        let c = against::compare(dir, &inputs.embedder)?;
        if ctx.json {
            println!("{}", serde_json::to_string_pretty(&c)?);
        } else {
            println!(
                "{} passages of {}: random pairs' cosine (of {}) MiniLM mean {:.3} p99 {:.3}, composed mean {:.3} p99 \
                 {:.3}; top-10 neighbours shared with MiniLM's (over {} passages): {:.3}",
                c.passages,
                dir.display(),
                c.pairs,
                c.minilm_pair_cosine.mean,
                c.minilm_pair_cosine.p99,
                c.composed_pair_cosine.mean,
                c.composed_pair_cosine.p99,
                c.probes,
                c.shared_top10
            );
        }
        return Ok(());
    }
    if args.edits == 0 {
        if let Some(m) = args.methods.iter().find(|m| !TIMED.iter().any(|t| t.name == *m)) {
            anyhow::bail!(
                "--methods {m}: the query measurement times {} (any LLM-free method with --edits)",
                TIMED.map(|t| t.name).join(", ")
            );
        }
    }
    if let (Some(spec), true) = (&args.index, args.edits > 0) {
        let report = edits::run(ctx, store::open(spec)?, &inputs, &args)?;
        return emit(ctx, &args, &report, edits::print);
    }
    if let Some(spec) = &args.index {
        let report = measure_queries(ctx, store::open(spec)?, &inputs, &args)?;
        return emit(ctx, &args, &report, print::print_queries);
    }

    let t = Instant::now();
    let generated = generate(&inputs.sources, args.passages, args.seed);
    let source = SourceReport {
        passages: inputs.sources.len(),
        sentences: inputs.sources.sentence_count(),
        empty_passages: inputs.sources.empty,
        vocabulary_words: inputs.vocabulary_words,
        word_vectors_cached: inputs.words_cached,
        word_vectors_secs: inputs.words_secs,
        generate_secs: t.elapsed().as_secs_f64(),
        duplicates_redrawn: generated.redrawn,
        duplicates_dropped: generated.dropped,
    };
    let passages = generated.corpus.passages.len();
    ctx.note(format!(
        "{passages} passages generated from {} source passages in {:.1}s ({} duplicate compositions redrawn, {} \
         dropped)",
        source.passages, source.generate_secs, source.duplicates_redrawn, source.duplicates_dropped
    ));

    let (spec, temp) = match &args.out {
        Some(d) => (d.clone(), None),
        None => {
            let base = words::cache_dir();
            std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
            let t = tempfile::Builder::new().prefix(&format!("index-{passages}-")).tempdir_in(&base)?;
            (t.path().to_string_lossy().into_owned(), Some(t))
        }
    };
    let store = store::open(&spec)?;
    ctx.note(format!("building in {}", store.location()));
    let graph = (!args.no_graph).then_some(&ctx.config.graph);
    let build = if args.add_graph {
        let manifest = store.manifest().with_context(|| format!("reading the index in {}", store.location()))?;
        let Some(manifest) = manifest else {
            anyhow::bail!("no index in {} to add a graph to: build one with --no-graph first", store.location())
        };
        // An index keeps its passages in canonical order (by id): compare in that order.
        let mut canonical = generated.corpus.passages.clone();
        hoprag::corpus::canonical_order(&mut canonical);
        if manifest.corpus_checksum != hoprag::index::checksum(&canonical) {
            anyhow::bail!(
                "the index in {} holds other passages than --passages {passages} --seed {} generate: build it with \
                 those and --no-graph first",
                store.location(),
                args.seed
            );
        }
        build_graph(store.as_ref(), generated.corpus, &inputs.embedder, &ctx.config.graph, ctx.progress)?
    } else {
        build_index(
            store.as_ref(),
            generated.corpus,
            inputs.embedder.clone(),
            graph,
            args.hnsw_quantization,
            ctx.progress,
        )?
    };
    let build_peak_rss_mb = peak_rss_mb();
    drop(inputs);

    let (queries, edits) = match args.edits {
        0 => (Some(query_in_child(ctx, &spec, &args)?), None),
        _ => (None, Some(edits::in_child(ctx, &spec, &args)?)),
    };
    // A store given with --out is the user's: never removed.
    match temp {
        Some(t) if !args.keep => t.close().with_context(|| format!("removing {spec}"))?,
        Some(t) => ctx.note(format!("index kept in {}", t.keep().display())),
        None => ctx.note(format!("index kept in {}", store.location())),
    }
    let report = Report {
        passages,
        seed: args.seed,
        threads: rayon::current_num_threads(),
        source,
        build,
        build_peak_rss_mb,
        queries,
        edits,
    };
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print::print(&report);
    }
    Ok(())
}

/// Builds the index and (with `graph` options) its heuristic entity graph in `store`:
/// the one place a benchmark index is written. Takes the corpus by value, to free it once
/// the triples are extracted.
/// Writes `report` to `--report` where given, and prints it: JSON, or as `print` does.
fn emit<R: Serialize>(ctx: &Context, args: &ScaleBench, report: &R, print: fn(&R)) -> anyhow::Result<()> {
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_vec_pretty(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print(report);
    }
    Ok(())
}

fn build_index(
    store: &dyn Store,
    corpus: LoadedCorpus,
    embedder: Arc<ComposedEmbedder>,
    graph_options: Option<&GraphOptions>,
    quantization: Quantization,
    progress: &dyn Progress,
) -> anyhow::Result<BuildReport> {
    // HNSW whatever the size, so that its figures are there at every N; bigger embedder
    // calls than the default, as the composed embedder is parallel within a call.
    let options = BuildOptions {
        vector_index: VectorIndexKind::Hnsw,
        hnsw: HnswParams { quantization, ..Default::default() },
        embed_batch: 4096,
        overwrite: true,
    };
    let stats = store::build_index(store, &corpus, vec!["bench scale".into()], embedder.as_ref(), &options, progress)
        .with_context(|| format!("building the index in {}", store.location()))?;
    let index_secs = stats.total_secs - stats.embed_secs;
    let index_report = BuildReport {
        embed_secs: stats.embed_secs,
        lexical_secs: stats.lexical_secs,
        hnsw_secs: stats.vector_secs,
        index_write_secs: stats.write_secs,
        index_secs_excluding_embedding: index_secs,
        total_secs_excluding_embedding: index_secs,
        index_bytes: stats.bytes_on_disk,
        index_built: true,
        embedder: embedder.coverage(),
        ..Default::default()
    };
    let Some(graph_options) = graph_options else { return Ok(index_report) };
    let g = build_graph(store, corpus, &embedder, graph_options, progress)?;
    Ok(BuildReport {
        embed_secs: index_report.embed_secs + g.embed_secs,
        graph_extract_secs: g.graph_extract_secs,
        graph_structure_secs: g.graph_structure_secs,
        graph_walk_secs: g.graph_walk_secs,
        graph_write_secs: g.graph_write_secs,
        graph_secs_excluding_embedding: g.graph_secs_excluding_embedding,
        total_secs_excluding_embedding: index_secs + g.graph_secs_excluding_embedding,
        graph: g.graph,
        embedder: embedder.coverage(),
        ..index_report
    })
}

/// Builds the heuristic entity graph of `corpus` and attaches it to the index in `store`
/// (which holds that corpus).
fn build_graph(
    store: &dyn Store,
    corpus: LoadedCorpus,
    embedder: &Arc<ComposedEmbedder>,
    options: &GraphOptions,
    progress: &dyn Progress,
) -> anyhow::Result<BuildReport> {
    let t = Instant::now();
    let extraction = extract_heuristic(&corpus.passages);
    let graph_extract_secs = t.elapsed().as_secs_f64();
    let graph = EntityGraph::build(&corpus.passages, extraction, embedder.as_ref(), options, progress)?;
    drop(corpus);
    let t = Instant::now();
    let attached = store::attach_graph(store, &graph, "heuristic".into())?;
    let graph_walk_secs = attached.walk_secs.unwrap_or(0.0);
    // Attaching solves the walk, then writes: the write is the rest.
    let graph_write_secs = t.elapsed().as_secs_f64() - graph_walk_secs;
    let s = graph.stats.clone();
    let graph_secs = graph_extract_secs + (s.build_secs - s.embed_secs) + graph_walk_secs + graph_write_secs;
    Ok(BuildReport {
        embed_secs: s.embed_secs,
        graph_extract_secs,
        graph_structure_secs: s.build_secs - s.embed_secs,
        graph_walk_secs,
        graph_write_secs,
        graph_secs_excluding_embedding: graph_secs,
        total_secs_excluding_embedding: graph_secs,
        graph: Some(s),
        embedder: embedder.coverage(),
        ..Default::default()
    })
}

/// Opens the index in `store`: the one place a benchmark index is read.
fn open_index(store: &dyn Store) -> anyhow::Result<Arc<Index>> {
    Ok(Arc::new(store.load().with_context(|| format!("opening the index in {}", store.location()))?))
}

/// Runs this benchmark's query half (`--index DIR --json`) in a new process and reads
/// its report.
fn query_in_child(ctx: &Context, spec: &str, args: &ScaleBench) -> anyhow::Result<QueryReport> {
    ctx.note("measuring the queries in a fresh process");
    let extra = ["--quiet".into(), format!("--repeat={}", args.repeat), format!("--filtered={}", args.filtered)];
    in_child(spec, args, &extra, "the query measurement")
}

/// Runs `hoprag bench scale --json --index SPEC` in a new process with the flags every
/// child run takes from `args` and `extra`, and reads its report; `what` names it in
/// errors.
fn in_child<R: serde::de::DeserializeOwned>(
    spec: &str,
    args: &ScaleBench,
    extra: &[String],
    what: &str,
) -> anyhow::Result<R> {
    let exe = std::env::current_exe().context("finding the hoprag executable")?;
    let out = std::process::Command::new(&exe)
        .args(["bench", "scale", "--json"])
        .arg("--index")
        .arg(spec)
        .arg("--data")
        .arg(&args.data)
        .args(["-k", &args.k.to_string()])
        .args(["--agreement", &args.agreement.to_string()])
        .args(["--questions", &args.questions.to_string()])
        .args(args.split_budget.map(|b| format!("--split-budget={b}")))
        .args((!args.methods.is_empty()).then(|| format!("--methods={}", args.methods.join(","))))
        .args(extra)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        anyhow::bail!("{what} ({} bench scale --index {}) failed: {}", exe.display(), store::redact(spec), out.status);
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("reading the report of {what}"))
}

fn measure_queries(
    ctx: &Context,
    store: Arc<dyn Store>,
    inputs: &Inputs,
    args: &ScaleBench,
) -> anyhow::Result<QueryReport> {
    let (repeat, k, agreement_questions, split_budget) = (args.repeat, args.k, args.agreement, args.split_budget);
    let t = Instant::now();
    let index = open_index(store.as_ref())?;
    let open_secs = t.elapsed().as_secs_f64();
    let embedder: Arc<dyn Embedder> = inputs.embedder.clone();
    let mut config = Config::default();
    if let Some(budget) = split_budget {
        config.methods.ppr.ppr.split_budget = budget;
        config.methods.phasegraph.graph.ppr.split_budget = budget;
    }
    let engine = Engine::with_index(store.clone(), index.clone(), embedder.clone(), config.clone())?;
    // What --methods asks for (all when it names none). The graph is loaded (minutes at a
    // million passages) for the graph methods only.
    let asked = |method: &str| args.methods.is_empty() || args.methods.iter().any(|m| m == method);
    let has_graph = index.manifest.graph.is_some() && TIMED.iter().any(|m| reads_graph(m) && asked(m.name));
    let t = Instant::now();
    if has_graph {
        engine.graph()?;
    }
    let graph_load_secs = t.elapsed().as_secs_f64();
    let rss_after_open_mb = rss_mb();
    let rss_file_after_open_mb = super::proc_status_mib("RssFile").unwrap_or(0.0);
    // The split walk's precomputation, which the first ppr query would otherwise pay.
    let ppr_precompute = if has_graph {
        let damping = Config::default().methods.ppr.ppr.damping;
        engine.graph()?.passage_response(index.vectors(), damping).map(|r| r.stats().clone())
    } else {
        None
    };
    let rss_after_precompute_mb = rss_mb();

    let before = inputs.embedder.coverage();
    let queries: Vec<Query> = inputs
        .questions
        .iter()
        .map(|q| Ok(Query::with_embedding(q.clone(), embedder.embed_one(q, TextKind::Query)?)))
        .collect::<hoprag::Result<_>>()?;
    let unknown_query_words = inputs.embedder.coverage().unknown_words - before.unknown_words;

    // HNSW's recall against exact search, so that its speed is read with its accuracy.
    let exact = index.exact_index();
    let hnsw = index.vector_index();
    let mut overlap = 0usize;
    let mut exact_lists = Vec::new();
    for q in &queries {
        let e = q.embedding.as_deref().expect("embedded above");
        let a = exact.search(e, k)?;
        let b = hnsw.search(e, k)?;
        overlap += a.iter().filter(|x| b.iter().any(|y| y.0 == x.0)).count();
        exact_lists.push(a);
    }
    let hnsw_recall_at_k = overlap as f64 / (queries.len() * k) as f64;
    // Recall and latency by search breadth, the breadth the index uses by default among
    // them.
    let mut breadths = vec![64, 128, 256, 512, 1000];
    let default_breadth = hoprag::index::hnsw_breadth(&index.manifest.hnsw, index.len());
    if !breadths.contains(&default_breadth) {
        breadths.push(default_breadth);
        breadths.sort_unstable();
    }
    let mut hnsw_breadths = Vec::new();
    if index.manifest.vector_index == VectorIndexKind::Hnsw {
        for &breadth in &breadths {
            let (mut overlap, mut ms) = (0usize, Vec::new());
            for pass in 0..2 {
                for (q, e) in queries.iter().zip(&exact_lists) {
                    let start = Instant::now();
                    let b = hnsw.search_with_breadth(q.embedding.as_deref().expect("embedded above"), k, breadth)?;
                    if pass == 1 {
                        ms.push(start.elapsed().as_secs_f64() * 1e3);
                        overlap += e.iter().filter(|x| b.iter().any(|y| y.0 == x.0)).count();
                    }
                }
            }
            hnsw_breadths.push(Breadth {
                breadth,
                default: breadth == default_breadth,
                recall_at_k: overlap as f64 / (queries.len() * k) as f64,
                ms: percentiles(ms),
            });
        }
    }

    let mut exact_config = Config::default();
    exact_config.methods.dense.exact = true;
    let label =
        |m: &MethodSpec, how: &str| if how.is_empty() { m.name.to_string() } else { format!("{} ({how})", m.name) };
    let mut methods: Vec<(String, Box<dyn Retriever>)> = vec![
        (label(&bm25::SPEC, ""), engine.retriever(bm25::SPEC.name)?),
        (label(&dense::SPEC, "hnsw"), engine.retriever(dense::SPEC.name)?),
        (label(&dense::SPEC, "exact"), engine.with_config(exact_config).retriever(dense::SPEC.name)?),
        (label(&hybrid::SPEC, "hnsw"), engine.retriever(hybrid::SPEC.name)?),
    ];
    if has_graph {
        methods.push((label(&ppr::SPEC, "heuristic graph"), engine.retriever(ppr::SPEC.name)?));
        methods.push((label(&auto::AUTO, ""), engine.retriever(auto::AUTO.name)?));
        methods.push((label(&phasegraph::SPEC, ""), engine.retriever(phasegraph::SPEC.name)?));
    }
    // Each label starts with its method's name.
    methods.retain(|(label, _)| asked(method_of(label)));
    let mut latency_ms = Vec::new();
    let (mut ppr_dense_fallbacks, mut ppr_split_fallbacks) = (0, 0);
    ctx.progress.start("querying", (methods.len() * queries.len() * (repeat + 1)) as u64);
    for (name, method) in &methods {
        let (mut ms, mut full_walks, mut unproven, mut steps) = (Vec::new(), 0, 0, Vec::<(String, f64)>::new());
        // Pass 0 warms caches and is not timed.
        for pass in 0..=repeat {
            for q in &queries {
                let start = Instant::now();
                let r = method.retrieve(q, k)?;
                let elapsed = start.elapsed().as_secs_f64() * 1e3;
                ctx.progress.advance(1);
                if pass == 0 {
                    if method_of(name) == ppr::SPEC.name && !r.trace.steps.iter().any(|s| s.name == WALK_STEP) {
                        ppr_dense_fallbacks += 1;
                    }
                    continue;
                }
                ms.push(elapsed);
                let fell_back = r.trace.steps.iter().any(|s| s.name == WALK_STEP && s.detail["split"] == false);
                full_walks += usize::from(fell_back);
                unproven +=
                    usize::from(r.trace.steps.iter().any(|s| s.name == WALK_STEP && s.detail["proven"] == false));
                if method_of(name) == ppr::SPEC.name && fell_back {
                    ppr_split_fallbacks += 1;
                }
                for s in &r.trace.steps {
                    let x = s.micros as f64 / 1e3 / (queries.len() * repeat) as f64;
                    match steps.iter_mut().find(|p| p.0 == s.name) {
                        Some(p) => p.1 += x,
                        None => steps.push((s.name.clone(), x)),
                    }
                }
            }
        }
        let mean_ms = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
        latency_ms.push(Latency {
            method: name.to_string(),
            ms: percentiles(ms),
            mean_ms,
            split_fallbacks: full_walks,
            split_unproven: unproven,
            steps,
        });
    }
    ctx.progress.finish();
    let filtered = match args.filtered {
        0 => Vec::new(),
        n => filtered::measure(ctx, &engine, &methods, &queries[..n.min(queries.len())], k, repeat)?,
    };
    let mut agreement = Vec::new();
    if has_graph {
        // Every graph method's walk: `ppr` and `auto` walk with `ppr`'s parameters,
        // `phasegraph` with its own.
        let mut full = config.clone();
        full.methods.ppr.ppr.split = false;
        full.methods.phasegraph.graph.ppr.split = false;
        let full = engine.with_config(full);
        let sample = sample(queries.len(), agreement_questions);
        for (name, method) in methods.iter().filter(|m| is_graph_method(&m.0)) {
            let exact = full.retriever(method.name())?;
            agreement.push(agree(name, method.as_ref(), exact.as_ref(), &queries, &sample, k)?);
        }
    }
    // A database's graph tables are shared between graphs: measured for folders only.
    let graph_bytes = store.folder().map(|f| dir_size(&f.join(index.generation()).join("graph")));
    Ok(QueryReport {
        questions: queries.len(),
        repeat,
        k,
        disk_bytes: store.size_bytes()?,
        graph_bytes,
        open_secs,
        graph_load_secs,
        rss_after_open_mb,
        rss_file_after_open_mb,
        rss_at_end_mb: rss_mb(),
        rss_file_at_end_mb: super::proc_status_mib("RssFile").unwrap_or(0.0),
        peak_rss_mb: peak_rss_mb(),
        hnsw_recall_at_k,
        hnsw_breadths,
        latency_ms,
        filtered,
        ppr_dense_fallbacks,
        ppr_precompute,
        rss_after_precompute_mb,
        ppr_split_fallbacks,
        agreement,
        unknown_query_words,
    })
}

/// `n` of `len` indexes, evenly spaced (all of them for 0 or `n ≥ len`).
fn sample(len: usize, n: usize) -> Vec<usize> {
    if n == 0 || n >= len {
        return (0..len).collect();
    }
    (0..n).map(|i| i * len / n).collect()
}

/// `method` against `exact` (the same method on the full walk) on the questions `sample`.
fn agree(
    name: &str,
    method: &dyn Retriever,
    exact: &dyn Retriever,
    queries: &[Query],
    sample: &[usize],
    k: usize,
) -> anyhow::Result<Agreement> {
    let ids = |r: hoprag::retrieve::Retrieval| r.hits.iter().map(|h| h.passage).collect::<Vec<_>>();
    if let Some(&first) = sample.first() {
        exact.retrieve(&queries[first], k)?;
    }
    let (mut overlap, mut identical, mut ms) = (0.0, 0, Vec::new());
    for &i in sample {
        let got = ids(method.retrieve(&queries[i], k)?);
        let start = Instant::now();
        let want = ids(exact.retrieve(&queries[i], k)?);
        ms.push(start.elapsed().as_secs_f64() * 1e3);
        overlap += want.iter().filter(|p| got.contains(p)).count() as f64 / want.len().max(1) as f64;
        identical += usize::from(got == want);
    }
    Ok(Agreement {
        method: name.to_string(),
        questions: sample.len(),
        top_k_overlap: overlap / sample.len().max(1) as f64,
        identical,
        full_walk_ms: percentiles(ms),
    })
}

/// The methods the benchmark times (`dense` twice: the HNSW and the exact search).
const TIMED: [&MethodSpec; 6] = [&bm25::SPEC, &dense::SPEC, &hybrid::SPEC, &ppr::SPEC, &auto::AUTO, &phasegraph::SPEC];

/// Whether a method reads the entity graph (timed only on an index with one).
fn reads_graph(method: &MethodSpec) -> bool {
    method.graph != GraphUse::No
}

/// The method a label names: its first word (`ppr (heuristic graph)`).
fn method_of(label: &str) -> &str {
    label.split(' ').next().unwrap_or(label)
}

/// Whether a method's label names a graph method.
fn is_graph_method(label: &str) -> bool {
    registry::find(method_of(label)).is_some_and(reads_graph)
}

fn has_graph_methods(q: &QueryReport) -> bool {
    q.latency_ms.iter().any(|l| is_graph_method(&l.method))
}
