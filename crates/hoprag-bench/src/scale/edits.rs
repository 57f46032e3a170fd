//! `hoprag bench scale --edits N`: a stream of document edits on the scale benchmark's
//! index, applied as `hoprag serve` applies them, while two query clients run every
//! LLM-free method against the engine being served.
//!
//! Each edit takes the server's path (`hoprag_serve::namespaces::Served::edit`): the
//! edit from the served generation with the walk updated as the server updates it
//! ([`WalkUpdate::SERVING`]: deferred, and solved after it is served), the
//! new generation loaded from the edit's own graph ([`Engine::reload_after`]), readied
//! with its walk solved on a thread of its own ([`Engine::prepare_walk_in_background`]),
//! then swapped in, the engine it replaces superseded (its background walk stops). The
//! clients keep the engine a query started with, as the server's requests do.
//!
//! The mix is fixed: of every four edits, two add a new document (a composition of the
//! scale corpus generator under another seed, with an id of its own), one changes an
//! existing passage (new text, same id and title) and one deletes an existing passage.
//! Every upsert carries a word no other passage has; its probe is a BM25 query for that
//! word, which must return it. A delete's probe is a BM25 query of the deleted passage's
//! own text, which must no longer return it (and did before). A dense probe (the
//! passage's text as the question) is reported beside it. Every method reads the one
//! engine served, so the BM25 probe seeing the edit is every method seeing it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hoprag::corpus::Passage;
use hoprag::embed::TextKind;
use hoprag::engine::Engine;
use hoprag::graph::walk::WALK_STEP;
use hoprag::progress::Silent;
use hoprag::retrieve::{auto, bm25, dense, phasegraph, ppr, GraphKind, GraphUse, Query, Retriever, METHODS};
use hoprag::store::edit::{EditOptions, EditWork, Request, WalkUpdate};
use hoprag::store::Store;
use hoprag::Config;
use serde::{Deserialize, Serialize};

use super::corpus::generate;
use super::{agree, open_index, sample, Agreement, Inputs, ScaleBench};
use crate::output::table;
use crate::{peak_rss_mb, percentiles, rss_mb, Context, Percentiles};

/// Queries per client in one phase, at most, whatever else bounds it.
const MAX_CLIENT_QUERIES: usize = 1_000_000;
/// Query clients.
const CLIENTS: usize = 2;

#[derive(Serialize, Deserialize)]
pub struct EditsReport {
    /// Passages before the first edit and after the last.
    pub passages_before: usize,
    pub passages_after: usize,
    /// `folder` or `postgres`.
    pub store: String,
    pub edits: usize,
    /// Edits requested per second (0: back to back); an edit that is due while the one
    /// before is still running starts when it ends (`lag_secs`).
    pub rate_per_sec: f64,
    /// The mix, in words.
    pub mix: String,
    /// The methods the clients ran (every LLM-free method the index supports, or those
    /// of --methods), and those left out with why.
    pub methods: Vec<String>,
    pub methods_skipped: Vec<(String, String)>,
    pub clients: usize,
    pub questions: usize,
    pub k: usize,
    /// From the first edit's request to the last edit's probe.
    pub stream_secs: f64,
    pub per_edit: Vec<EditRecord>,
    pub summary: Summary,
    /// Query latency per method while the edits ran, and after the stream once the last
    /// edit's walk was solved in the background (`walk_settle_secs`).
    pub during: Vec<MethodLatency>,
    pub after: Vec<MethodLatency>,
    /// From the last edit's probe until its generation's walk was solved in the
    /// background (the split walk then serves the graph methods again); `None` when
    /// there is no walk to wait for, or --settle-secs passed first (`walk_settled`).
    pub walk_settle_secs: Option<f64>,
    pub walk_settled: bool,
    /// After the stream, on the edited engine: ppr, auto and phasegraph against the
    /// same method with the full walk (`split = false`) on the same graph.
    pub agreement: Vec<Agreement>,
    pub rss_at_end_mb: f64,
    pub peak_rss_mb: f64,
}

#[derive(Serialize, Deserialize)]
pub struct EditRecord {
    pub edit: usize,
    /// `add`, `change` or `delete`.
    pub kind: String,
    pub id: String,
    /// How late the edit started against its schedule (the one before still running).
    pub lag_secs: f64,
    /// The edit itself: planned, derived and published as a new generation.
    pub write_secs: f64,
    /// The new generation loaded from the edit's graph, readied and served.
    pub serve_secs: f64,
    /// From the request (the edit's start) until the probe, on the served engine, saw it.
    pub visible_secs: f64,
    /// From when the edit was due (the stream's start plus its place over the rate) until
    /// the probe saw it: `lag_secs + visible_secs`, what a client sending edits at the
    /// rate waits when the edits cannot keep up with it.
    #[serde(default)]
    pub visible_after_due_secs: f64,
    /// The BM25 probe saw the edit (an upsert returned, a deleted passage gone).
    pub probe_passed: bool,
    /// Deletes: the same probe returned the passage before the delete (else the probe
    /// proves nothing for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_before: Option<bool>,
    /// The passage's own text as a dense question: an upsert in its top k, a delete not.
    pub dense_probe_passed: bool,
    /// This process's I/O over the write, and over the serving (deltas of
    /// /proc/self/io; the query clients' reads count too, while they run).
    pub write_io: Io,
    pub serve_io: Io,
    /// Bytes of the store before the edit and after it is served (a folder: every file
    /// under it, a hard-linked file once, in allocated blocks as `du` counts; PostgreSQL:
    /// the live generation's `size_bytes`).
    pub store_bytes_before: u64,
    pub store_bytes_after: u64,
    pub work: EditWork,
}

/// Deltas of `/proc/self/io`: bytes through read/write calls (`rchar`, `wchar`: page
/// cache included) and bytes the process made the storage read or write (`read_bytes`,
/// `write_bytes`).
#[derive(Serialize, Deserialize, Clone, Copy, Default, Debug)]
pub struct Io {
    pub rchar: u64,
    pub wchar: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl Io {
    fn now() -> Io {
        let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        let field = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        Io {
            rchar: field("rchar"),
            wchar: field("wchar"),
            read_bytes: field("read_bytes"),
            write_bytes: field("write_bytes"),
        }
    }

    fn since(self, before: Io) -> Io {
        Io {
            rchar: self.rchar.saturating_sub(before.rchar),
            wchar: self.wchar.saturating_sub(before.wchar),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
pub struct Summary {
    /// Seconds, over the stream.
    pub write_secs: Option<Percentiles>,
    pub write_secs_mean: f64,
    pub visible_secs: Option<Percentiles>,
    pub visible_secs_mean: f64,
    /// `visible_after_due_secs` over the stream: queueing behind slower edits included.
    #[serde(default)]
    pub visible_after_due_secs: Option<Percentiles>,
    /// Edits the stream applied per second (all of them over `stream_secs`' edit part).
    #[serde(default)]
    pub edits_per_sec: f64,
    pub probes_passed: usize,
    pub probes_failed: usize,
    /// Deletes whose probe did not return the passage before (nothing to see vanish).
    pub probes_unverifiable: usize,
    pub dense_probes_passed: usize,
    /// Means per edit of the write's I/O and the serving's, in bytes.
    pub write_io_mean: Io,
    pub serve_io_mean: Io,
    /// The store before the first edit, after the last, and once the stream and its
    /// background walk were done (the walk stored).
    pub store_bytes_start: u64,
    pub store_bytes_after_stream: u64,
    pub store_bytes_end: u64,
    /// Median growth of the store per edit, bytes.
    pub store_growth_per_edit_p50: f64,
}

#[derive(Serialize, Deserialize)]
pub struct MethodLatency {
    pub method: String,
    pub queries: usize,
    pub ms: Option<Percentiles>,
    pub mean_ms: f64,
    /// Graph queries that ran the full walk (the split walk not ready, or not proven).
    pub full_walks: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Add,
    Change,
    Delete,
}

impl Kind {
    /// Two adds, a change and a delete in every four edits.
    fn of(edit: usize) -> Kind {
        match edit % 4 {
            0 | 2 => Kind::Add,
            1 => Kind::Change,
            _ => Kind::Delete,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Add => "add",
            Kind::Change => "change",
            Kind::Delete => "delete",
        }
    }
}

/// One planned edit.
struct Planned {
    kind: Kind,
    request: Request,
    id: String,
    /// BM25 question of the probe.
    probe: String,
    /// The passage's text, for the dense probe.
    text: String,
}

/// The engine being served: swapped whole after each edit; a query keeps the one it
/// started with.
struct Served {
    engine: RwLock<Arc<Engine>>,
}

impl Served {
    fn engine(&self) -> Arc<Engine> {
        self.engine.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn swap(&self, next: Arc<Engine>) -> Arc<Engine> {
        std::mem::replace(&mut *self.engine.write().unwrap_or_else(PoisonError::into_inner), next)
    }
}

/// What a client measured: (method, ms, ran the full walk).
type Samples = Vec<(usize, f64, bool)>;

/// A client's retrievers, built on the engine they were built on, each on its first query.
type Retrievers = (Arc<Engine>, Vec<Option<Box<dyn Retriever>>>);

pub fn run(ctx: &Context, store: Arc<dyn Store>, inputs: &Inputs, args: &ScaleBench) -> anyhow::Result<EditsReport> {
    let k = args.k;
    let index = open_index(store.as_ref())?;
    let mut config = Config::default();
    if let Some(budget) = args.split_budget {
        config.methods.ppr.ppr.split_budget = budget;
        config.methods.phasegraph.graph.ppr.split_budget = budget;
    }
    let engine = Engine::with_index(store.clone(), index.clone(), inputs.embedder.clone(), config.clone())?;
    // As the server opens a namespace: the graph loaded, the walk prepared, the next two
    // edits' buffers readied. Not the graph where no method the clients run reads it:
    // then the edits derive none (each is served as a delta; a reader derives its graph).
    let t = Instant::now();
    let graph_read = args.methods.is_empty()
        || METHODS.iter().any(|m| m.graph != GraphUse::No && args.methods.iter().any(|a| a == m.name));
    let graph_read = graph_read && index.manifest.graph.is_some();
    if graph_read {
        // Every method: GEAR's triple index too, as the server prepares it; methods
        // named: only the walk (a GEAR method among them builds it on its first query).
        if args.methods.is_empty() {
            engine.prepare()?;
        } else {
            engine.prepare_walk()?;
        }
    }
    ctx.note(format!("{} passages opened and prepared in {:.1}s", index.len(), t.elapsed().as_secs_f64()));

    // Every LLM-free method of the registry the index supports.
    let (mut methods, mut methods_skipped) = (Vec::new(), Vec::new());
    for m in METHODS {
        if !args.methods.is_empty() && !args.methods.iter().any(|a| a == m.name) {
            continue;
        }
        if engine.uses_llm(m.name) {
            methods_skipped.push((m.name.to_string(), "asks the LLM".to_string()));
        } else if !m.runs_on(engine.graph_kind()) {
            methods_skipped.push((m.name.to_string(), "needs an entity graph".to_string()));
        } else {
            match engine.retriever(m.name) {
                Ok(_) => methods.push(m.name.to_string()),
                Err(e) => methods_skipped.push((m.name.to_string(), e.to_string())),
            }
        }
    }
    anyhow::ensure!(!methods.is_empty(), "no LLM-free method to query (skipped: {methods_skipped:?})");
    ctx.note(format!("methods: {}", methods.join(", ")));

    let queries: Vec<Query> = inputs
        .questions
        .iter()
        .map(|q| Ok(Query::with_embedding(q.clone(), engine.embedder.embed_one(q, TextKind::Query)?)))
        .collect::<hoprag::Result<_>>()?;
    anyhow::ensure!(!queries.is_empty(), "no questions to query with");
    let plan = plan_edits(inputs, &engine, args.edits, args.seed)?;
    let served = Served { engine: RwLock::new(Arc::new(engine)) };

    // Warm-up, untimed: every method's first-use structures (GEAR's triple index).
    let t = Instant::now();
    warm_up(&served, &methods, &queries, k)?;
    ctx.note(format!("warm-up of {} methods in {:.1}s", methods.len(), t.elapsed().as_secs_f64()));

    let passages_before = index.len();
    drop(index);
    let store_bytes_start = store_bytes(store.as_ref())?;
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (per_edit, during) = std::thread::scope(|scope| -> anyhow::Result<_> {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (served, methods, queries, stop) = (&served, &methods, &queries, &stop);
                scope.spawn(move || client(c, served, methods, queries, k, stop, MAX_CLIENT_QUERIES, None))
            })
            .collect();
        let edited = stream(ctx, &served, store.as_ref(), plan, args.edit_rate, k, graph_read);
        stop.store(true, Ordering::Release);
        let mut samples = Samples::new();
        for c in clients {
            samples.extend(c.join().map_err(|_| anyhow::anyhow!("a query client panicked"))??);
        }
        Ok((edited?, samples))
    })?;
    let stream_secs = started.elapsed().as_secs_f64();
    let store_bytes_after_stream = store_bytes(store.as_ref())?;

    // The last edit's walk, solved in the background, as the server leaves it.
    let engine = served.engine();
    let (walk_settle_secs, walk_settled) =
        if graph_read { settle(ctx, &engine, Duration::from_secs(args.settle_secs))? } else { (None, true) };
    drop(engine);

    // After the stream: each client a share of every method on every question (or
    // --after-queries each), within --after-secs.
    let per_client = match args.after_queries {
        0 => (methods.len() * queries.len()).div_ceil(CLIENTS),
        n => n,
    };
    let deadline = Instant::now() + Duration::from_secs(args.after_secs);
    let after = std::thread::scope(|scope| -> anyhow::Result<Samples> {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (served, methods, queries) = (&served, &methods, &queries);
                scope.spawn(move || {
                    client(c, served, methods, queries, k, &AtomicBool::new(false), per_client, Some(deadline))
                })
            })
            .collect();
        let mut samples = Samples::new();
        for c in clients {
            samples.extend(c.join().map_err(|_| anyhow::anyhow!("a query client panicked"))??);
        }
        Ok(samples)
    })?;

    // The graph methods against the full walk on the edited graph.
    let engine = served.engine();
    let mut agreement = Vec::new();
    if engine.graph_kind() != GraphKind::None {
        let mut full = engine.config.clone();
        full.methods.ppr.ppr.split = false;
        full.methods.phasegraph.graph.ppr.split = false;
        let full = engine.with_config(full);
        let picked = sample(queries.len(), args.agreement);
        for name in [ppr::SPEC.name, auto::AUTO.name, phasegraph::SPEC.name] {
            if !methods.iter().any(|m| m == name) {
                continue;
            }
            let (method, exact) = (engine.retriever(name)?, full.retriever(name)?);
            agreement.push(agree(name, method.as_ref(), exact.as_ref(), &queries, &picked, k)?);
        }
    }
    let passages_after = engine.index.len();
    drop(engine);
    let store_bytes_end = store_bytes(store.as_ref())?;

    let summary = summarize(&per_edit, stream_secs, store_bytes_start, store_bytes_after_stream, store_bytes_end);
    Ok(EditsReport {
        passages_before,
        passages_after,
        store: if store.folder().is_some() { "folder" } else { "postgres" }.into(),
        edits: per_edit.len(),
        rate_per_sec: args.edit_rate,
        mix: "of every 4 edits: 2 adds of a new document (the corpus generator, another seed), 1 change of an \
              existing passage's text, 1 delete of an existing passage"
            .into(),
        methods: methods.clone(),
        methods_skipped,
        clients: CLIENTS,
        questions: queries.len(),
        k,
        stream_secs,
        per_edit,
        summary,
        during: latencies(&methods, &during),
        after: latencies(&methods, &after),
        walk_settle_secs,
        walk_settled,
        agreement,
        rss_at_end_mb: rss_mb(),
        peak_rss_mb: peak_rss_mb(),
    })
}

/// The edits, in order: new documents from the scale generator under another seed, each
/// with a word of its own; changes and deletes of passages of the index, spread over it,
/// each touched once.
fn plan_edits(inputs: &Inputs, engine: &Engine, edits: usize, seed: u64) -> anyhow::Result<Vec<Planned>> {
    let passages = engine.index.passages();
    let ids: HashSet<&str> = passages.iter().map(|p| p.id.as_str()).collect();
    let fresh = generate(&inputs.sources, edits.max(1), seed.wrapping_mul(0x9e37_79b9).wrapping_add(0x5eed)).corpus;
    let mut used = HashSet::new();
    let mut next_target = {
        let mut step = 0u64;
        move |used: &mut HashSet<usize>| -> Option<usize> {
            // Evenly spread over the index, by a multiplicative hash of the step.
            for _ in 0..passages.len() * 2 {
                step += 1;
                let at = (step.wrapping_mul(2_654_435_761) % passages.len() as u64) as usize;
                if used.insert(at) {
                    return Some(at);
                }
            }
            None
        }
    };
    let mut plan = Vec::new();
    for i in 0..edits {
        let kind = Kind::of(i);
        let word = format!("zqedit{seed}x{i}w");
        let source = &fresh.passages[i % fresh.passages.len()];
        let planned = match kind {
            Kind::Add => {
                let mut id = format!("edit-{seed}-{i}");
                while ids.contains(id.as_str()) {
                    id.push('x');
                }
                let p = Passage::new(id.clone(), source.title.clone(), format!("{} {word}", source.text));
                let text = p.index_text();
                Planned { kind, request: Request::Upsert(vec![p]), id, probe: word, text }
            }
            Kind::Change | Kind::Delete => {
                let at = next_target(&mut used).context("no passage left to change or delete")?;
                let old = &passages[at];
                if kind == Kind::Delete {
                    let text = old.index_text();
                    Planned {
                        kind,
                        request: Request::Delete(vec![old.id.clone()]),
                        id: old.id.clone(),
                        probe: text.clone(),
                        text,
                    }
                } else {
                    let mut p = old.clone();
                    p.text = format!("{} {word}", source.text);
                    let text = p.index_text();
                    Planned { kind, request: Request::Upsert(vec![p]), id: old.id.clone(), probe: word, text }
                }
            }
        };
        plan.push(planned);
    }
    Ok(plan)
}

/// Applies the edits at `rate` per second (0: back to back), each as the server does,
/// and probes each on the engine served after it.
fn stream(
    ctx: &Context,
    served: &Served,
    store: &dyn Store,
    plan: Vec<Planned>,
    rate: f64,
    k: usize,
    graph_read: bool,
) -> anyhow::Result<Vec<EditRecord>> {
    let start = Instant::now();
    let mut records = Vec::new();
    let total = plan.len();
    for (i, edit) in plan.into_iter().enumerate() {
        let due = if rate > 0.0 { Duration::from_secs_f64(i as f64 / rate) } else { start.elapsed() };
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        let lag_secs = start.elapsed().saturating_sub(due).as_secs_f64();
        let store_bytes_before = store_bytes(store)?;
        let probe_before = match edit.kind {
            Kind::Delete => Some(bm25_returns(&served.engine(), &edit.probe, &edit.id, k)?),
            _ => None,
        };

        // The request: Served::edit.
        let requested = Instant::now();
        let engine = served.engine();
        let io = Io::now();
        // The walk as the server updates it.
        let options = EditOptions { walk: WalkUpdate::SERVING, source: "bench scale --edits".into(), dry_run: false };
        let report =
            engine.edit(&edit.request, &options, &Silent).with_context(|| format!("edit {i} ({})", edit.id))?;
        drop(engine);
        let write_secs = requested.elapsed().as_secs_f64();
        let write_io = Io::now().since(io);
        // Served::serve_edited: the edit's graph, readied, walk in the background.
        let io = Io::now();
        let t = Instant::now();
        if report.generation.is_some() {
            let engine = served.engine();
            let next = Arc::new(engine.reload_after(&report)?);
            if graph_read {
                next.prepare_walk_in_background()?;
            }
            served.swap(next).supersede();
        }
        let serve_secs = t.elapsed().as_secs_f64();
        let serve_io = Io::now().since(io);

        // The probe, on the engine served now.
        let engine = served.engine();
        let present = edit.kind != Kind::Delete;
        let probe_passed = bm25_returns(&engine, &edit.probe, &edit.id, k)? == present;
        let visible_secs = requested.elapsed().as_secs_f64();
        let dense = engine.retriever(dense::SPEC.name)?;
        let q = Query::with_embedding(edit.text.clone(), engine.embedder.embed_one(&edit.text, TextKind::Query)?);
        let dense_probe_passed = returns(&engine, dense.as_ref(), &q, &edit.id, k)? == present;
        drop(engine);
        let store_bytes_after = store_bytes(store)?;
        ctx.note(format!(
            "edit {}/{total} {} {}: write {write_secs:.2}s, served {serve_secs:.2}s, visible {visible_secs:.2}s{}",
            i + 1,
            edit.kind.name(),
            edit.id,
            if probe_passed { "" } else { " (PROBE FAILED)" }
        ));
        records.push(EditRecord {
            edit: i,
            kind: edit.kind.name().into(),
            id: edit.id,
            lag_secs,
            write_secs,
            serve_secs,
            visible_secs,
            visible_after_due_secs: lag_secs + visible_secs,
            probe_passed,
            probe_before,
            dense_probe_passed,
            write_io,
            serve_io,
            store_bytes_before,
            store_bytes_after,
            work: report.work,
        });
    }
    Ok(records)
}

fn bm25_returns(engine: &Engine, question: &str, id: &str, k: usize) -> anyhow::Result<bool> {
    let bm25 = engine.retriever(bm25::SPEC.name)?;
    returns(engine, bm25.as_ref(), &Query::new(question), id, k)
}

fn returns(engine: &Engine, method: &dyn Retriever, q: &Query, id: &str, k: usize) -> anyhow::Result<bool> {
    let hits = method.retrieve(q, k)?.hits;
    Ok(hits.iter().any(|h| engine.index.passages()[h.passage as usize].id == id))
}

/// Every method on two questions, untimed.
fn warm_up(served: &Served, methods: &[String], queries: &[Query], k: usize) -> anyhow::Result<()> {
    let engine = served.engine();
    for name in methods {
        let method = engine.retriever(name)?;
        for q in queries.iter().take(2) {
            method.retrieve(q, k)?;
        }
    }
    Ok(())
}

/// A query client: method after method, question after question (the two clients
/// alternating along one sequence), back to back, on the engine served at each query's
/// start; until `stop`, `limit` queries or `deadline`.
#[allow(clippy::too_many_arguments)]
fn client(
    c: usize,
    served: &Served,
    methods: &[String],
    queries: &[Query],
    k: usize,
    stop: &AtomicBool,
    limit: usize,
    deadline: Option<Instant>,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::new();
    let mut built: Option<Retrievers> = None;
    for j in 0..limit {
        if stop.load(Ordering::Acquire) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let engine = served.engine();
        if !built.as_ref().is_some_and(|(e, _)| Arc::ptr_eq(e, &engine)) {
            built = Some((engine, methods.iter().map(|_| None).collect()));
        }
        let (engine, retrievers) = built.as_mut().expect("built above");
        // The clients take turns along one sequence of (method, question) pairs.
        let pair = c + CLIENTS * j;
        let m = pair % methods.len();
        let q = &queries[(pair / methods.len()) % queries.len()];
        // A method's first query on a generation counts what building it waits for (a
        // structure of the new graph), as a server's request would.
        let t = Instant::now();
        let method = match &mut retrievers[m] {
            Some(method) => method,
            slot => slot.insert(engine.retriever(&methods[m])?),
        };
        let r = method.retrieve(q, k)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        // A walk without a split step that ranked: the split walk was not ready (solved in
        // the background) or did not prove its ranking.
        let walks = || r.trace.steps.iter().filter(|s| s.name == WALK_STEP);
        let full_walk = walks().next().is_some() && !walks().any(|s| s.detail["split"] == true);
        samples.push((m, ms, full_walk));
    }
    Ok(samples)
}

/// Waits until the served engine's walk is ready (solved in the background after the
/// last edit), at most `limit`.
fn settle(ctx: &Context, engine: &Engine, limit: Duration) -> anyhow::Result<(Option<f64>, bool)> {
    if engine.graph_kind() == GraphKind::None || !engine.config.methods.ppr.ppr.split {
        return Ok((None, true));
    }
    let graph = engine.graph()?;
    let damping = engine.config.methods.ppr.ppr.damping;
    let t = Instant::now();
    ctx.note("waiting for the last edit's walk, solved in the background");
    while t.elapsed() < limit {
        if graph.walk_solved(engine.index.vectors(), damping) {
            return Ok((Some(t.elapsed().as_secs_f64()), true));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((None, false))
}

fn latencies(methods: &[String], samples: &Samples) -> Vec<MethodLatency> {
    methods
        .iter()
        .enumerate()
        .map(|(m, name)| {
            let ms: Vec<f64> = samples.iter().filter(|s| s.0 == m).map(|s| s.1).collect();
            MethodLatency {
                method: name.clone(),
                queries: ms.len(),
                mean_ms: ms.iter().sum::<f64>() / ms.len().max(1) as f64,
                ms: (!ms.is_empty()).then(|| percentiles(ms)),
                full_walks: samples.iter().filter(|s| s.0 == m && s.2).count(),
            }
        })
        .collect()
}

fn summarize(edits: &[EditRecord], stream_secs: f64, start: u64, after_stream: u64, end: u64) -> Summary {
    let of = |f: fn(&EditRecord) -> f64| -> (Option<Percentiles>, f64) {
        let v: Vec<f64> = edits.iter().map(f).collect();
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        ((!v.is_empty()).then(|| percentiles(v)), mean)
    };
    let (write_secs, write_secs_mean) = of(|e| e.write_secs);
    let (visible_secs, visible_secs_mean) = of(|e| e.visible_secs);
    let (visible_after_due_secs, _) = of(|e| e.visible_after_due_secs);
    let mean_io = |f: fn(&EditRecord) -> Io| -> Io {
        let n = edits.len().max(1) as u64;
        let sum = edits.iter().map(f).fold(Io::default(), |a, b| Io {
            rchar: a.rchar + b.rchar,
            wchar: a.wchar + b.wchar,
            read_bytes: a.read_bytes + b.read_bytes,
            write_bytes: a.write_bytes + b.write_bytes,
        });
        Io {
            rchar: sum.rchar / n,
            wchar: sum.wchar / n,
            read_bytes: sum.read_bytes / n,
            write_bytes: sum.write_bytes / n,
        }
    };
    let growth: Vec<f64> = edits.iter().map(|e| e.store_bytes_after as f64 - e.store_bytes_before as f64).collect();
    Summary {
        write_secs,
        write_secs_mean,
        visible_secs,
        visible_secs_mean,
        visible_after_due_secs,
        edits_per_sec: edits.len() as f64 / stream_secs.max(1e-9),
        probes_passed: edits.iter().filter(|e| e.probe_passed).count(),
        probes_failed: edits.iter().filter(|e| !e.probe_passed).count(),
        probes_unverifiable: edits.iter().filter(|e| e.probe_before == Some(false)).count(),
        dense_probes_passed: edits.iter().filter(|e| e.dense_probe_passed).count(),
        write_io_mean: mean_io(|e| e.write_io),
        serve_io_mean: mean_io(|e| e.serve_io),
        store_bytes_start: start,
        store_bytes_after_stream: after_stream,
        store_bytes_end: end,
        store_growth_per_edit_p50: if growth.is_empty() { 0.0 } else { percentiles(growth).p50 },
    }
}

/// Bytes of the store: a folder's files (a hard-linked file once, allocated blocks, as
/// `du` counts them); a database's live generation.
fn store_bytes(store: &dyn Store) -> anyhow::Result<u64> {
    match store.folder() {
        Some(root) => Ok(du(root)),
        None => Ok(store.size_bytes()?),
    }
}

fn du(root: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut seen = HashSet::new();
    let mut total = 0;
    let mut dirs = vec![root.to_path_buf()];
    // Files come and go while an edit stages a generation: what cannot be read is skipped.
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else { continue };
            if meta.is_dir() {
                dirs.push(entry.path());
            } else if seen.insert((meta.dev(), meta.ino())) {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}

/// Runs the edits (`--index SPEC --edits N`) in a new process on the index just built,
/// and reads its report.
pub fn in_child(ctx: &Context, spec: &str, args: &ScaleBench) -> anyhow::Result<EditsReport> {
    ctx.note("running the edits in a fresh process");
    let extra = [
        format!("--seed={}", args.seed),
        format!("--edits={}", args.edits),
        format!("--edit-rate={}", args.edit_rate),
        format!("--settle-secs={}", args.settle_secs),
        format!("--after-secs={}", args.after_secs),
        format!("--after-queries={}", args.after_queries),
    ];
    super::in_child(spec, args, &extra, &format!("the edits (--edits {})", args.edits))
}

pub fn print(r: &EditsReport) {
    let mb = |b: u64| format!("{:.1}", b as f64 / 1e6);
    println!(
        "{} edits on {} passages ({} store; {} after), {}; {} clients running {} ({} questions, k = {}) \
         back to back",
        r.edits,
        r.passages_before,
        r.store,
        r.passages_after,
        if r.rate_per_sec > 0.0 { format!("{} per second", r.rate_per_sec) } else { "back to back".into() },
        r.clients,
        r.methods.join(", "),
        r.questions,
        r.k
    );
    for (m, why) in &r.methods_skipped {
        println!("not queried: {m} ({why})");
    }
    let header: Vec<String> = [
        "edit",
        "kind",
        "id",
        "lag s",
        "write s",
        "served s",
        "visible s",
        "probe",
        "write: rchar / wchar MB",
        "write: disk read / written MB",
        "serve: rchar / disk read MB",
        "store MB before -> after",
    ]
    .map(String::from)
    .to_vec();
    let rows: Vec<Vec<String>> = r
        .per_edit
        .iter()
        .map(|e| {
            vec![
                e.edit.to_string(),
                e.kind.clone(),
                e.id.clone(),
                format!("{:.2}", e.lag_secs),
                format!("{:.2}", e.write_secs),
                format!("{:.2}", e.serve_secs),
                format!("{:.2}", e.visible_secs),
                match (e.probe_passed, e.probe_before) {
                    (true, Some(false)) => "ok (unverifiable)".into(),
                    (true, _) => "ok".into(),
                    (false, _) => "FAILED".into(),
                },
                format!("{} / {}", mb(e.write_io.rchar), mb(e.write_io.wchar)),
                format!("{} / {}", mb(e.write_io.read_bytes), mb(e.write_io.write_bytes)),
                format!("{} / {}", mb(e.serve_io.rchar), mb(e.serve_io.read_bytes)),
                format!("{} -> {}", mb(e.store_bytes_before), mb(e.store_bytes_after)),
            ]
        })
        .collect();
    println!("{}", table(&header, &rows));
    let s = &r.summary;
    let p = |x: &Option<Percentiles>| x.map_or("-".into(), |p| format!("p50 {:.2} s, p99 {:.2} s", p.p50, p.p99));
    println!(
        "write: {} (mean {:.2} s); visible after the request: {} (mean {:.2} s); after it was due: {}; {:.3} \
         edits per second",
        p(&s.write_secs),
        s.write_secs_mean,
        p(&s.visible_secs),
        s.visible_secs_mean,
        p(&s.visible_after_due_secs),
        s.edits_per_sec
    );
    println!(
        "probes: {} passed, {} failed ({} deletes unverifiable); dense probes passed {}; stream {:.1} s",
        s.probes_passed, s.probes_failed, s.probes_unverifiable, s.dense_probes_passed, r.stream_secs
    );
    println!(
        "per edit, mean: write read {} MB (disk {} MB), wrote {} MB (disk {} MB); serving read {} MB (disk {} MB)",
        mb(s.write_io_mean.rchar),
        mb(s.write_io_mean.read_bytes),
        mb(s.write_io_mean.wchar),
        mb(s.write_io_mean.write_bytes),
        mb(s.serve_io_mean.rchar),
        mb(s.serve_io_mean.read_bytes)
    );
    println!(
        "store: {} MB before, {} MB after the stream, {} MB at the end; growth per edit p50 {} MB",
        mb(s.store_bytes_start),
        mb(s.store_bytes_after_stream),
        mb(s.store_bytes_end),
        (s.store_growth_per_edit_p50 / 1e6 * 10.0).round() / 10.0
    );
    match (r.walk_settle_secs, r.walk_settled) {
        (Some(secs), _) => println!("the last edit's walk was ready {secs:.1} s after its probe"),
        (None, true) => println!("no walk to wait for"),
        (None, false) => {
            println!("the last edit's walk was not ready within --settle-secs: \"after\" ran the full walk")
        }
    }
    let header: Vec<String> = [
        "method",
        "during: queries",
        "p50 ms",
        "p99 ms",
        "full walks",
        "after: queries",
        "p50 ms",
        "p99 ms",
        "full walks",
    ]
    .map(String::from)
    .to_vec();
    let cell = |l: Option<&MethodLatency>| -> Vec<String> {
        match l {
            Some(l) => vec![
                l.queries.to_string(),
                l.ms.map_or("-".into(), |p| format!("{:.2}", p.p50)),
                l.ms.map_or("-".into(), |p| format!("{:.2}", p.p99)),
                l.full_walks.to_string(),
            ],
            None => vec!["-".into(); 4],
        }
    };
    let rows: Vec<Vec<String>> = r
        .methods
        .iter()
        .map(|m| {
            let mut row = vec![m.clone()];
            row.extend(cell(r.during.iter().find(|l| &l.method == m)));
            row.extend(cell(r.after.iter().find(|l| &l.method == m)));
            row
        })
        .collect();
    println!("{}", table(&header, &rows));
    for a in &r.agreement {
        println!(
            "{} against the full walk on the edited graph, {} questions: {} identical, top-{} overlap {:.3}",
            a.method, a.questions, a.identical, r.k, a.top_k_overlap
        );
    }
    println!("memory: {:.0} MB at the end, peak {:.0} MB", r.rss_at_end_mb, r.peak_rss_mb);
}
