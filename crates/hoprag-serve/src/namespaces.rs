//! The namespaces a server serves: each an engine of its own (swapped whole when an
//! edit or another process publishes a generation), opened on first use, and closed
//! least recently used first beyond `serve.max_open_namespaces`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use super::api::ApiError;
use hoprag::engine::Engine;
use hoprag::error::{Error, Result};
use hoprag::lazy::LazyMap;
use hoprag::progress::Silent;
use hoprag::store::edit::{EditOptions, EditReport, Request, WalkUpdate};
use hoprag::store::{Namespace, Open};

/// One namespace being served.
pub struct Served {
    pub namespace: Namespace,
    /// Swapped whole, without a lock: see [`Served::serve_live`].
    engine: ArcSwap<Engine>,
    /// This server's edits in flight: the store follower leaves the generations they
    /// publish to them (each serves its own from memory, [`Served::serve_edited`])
    /// rather than loading them from the store a second time meanwhile.
    editing: AtomicUsize,
    /// When it was last asked for ([`Namespaces::tick`]), for closing the least recent.
    last_used: AtomicU64,
}

/// What an edit did, and the engine served after it.
pub struct Edited {
    pub report: EditReport,
    pub engine: Arc<Engine>,
}

impl Served {
    fn new(namespace: Namespace, engine: Engine) -> Result<Served> {
        preload_graph(&engine)?;
        Ok(Served {
            namespace,
            engine: ArcSwap::from_pointee(engine),
            editing: AtomicUsize::new(0),
            last_used: AtomicU64::new(0),
        })
    }

    /// The engine now served; a request keeps the one it started with.
    pub fn engine(&self) -> Arc<Engine> {
        self.engine.load_full()
    }

    /// Applies an edit (upsert, delete or sync) to the namespace's index, as one new
    /// generation published atomically with every method's structures brought up to
    /// date, and then serves it; a dry run or an edit that changes nothing publishes
    /// nothing. Every edit route comes here. The store orders concurrent writers (no
    /// lock is held here); readers keep the engine they have. An unknown id to delete is
    /// a 404 naming it, and nothing changes. Blocking: call it on the blocking pool.
    pub fn edit(&self, request: Request, options: EditOptions) -> Result<Edited, ApiError> {
        let engine = self.engine();
        if let Request::Delete(ids) = &request {
            let known: HashSet<&str> =
                engine.index.passages().iter().flat_map(|p| [p.id.as_str(), p.document()]).collect();
            let unknown: Vec<String> =
                ids.iter().filter(|id| !known.contains(id.as_str())).take(10).map(|id| format!("{id:?}")).collect();
            if !unknown.is_empty() {
                return Err(ApiError::not_found(format!(
                    "no document or passage has the id {}; nothing was deleted",
                    unknown.join(", ")
                )));
            }
        }
        let _in_flight = InFlight::new(&self.editing);
        // The walk is solved after the new generation is served (see serve_edited).
        let options = EditOptions { walk: WalkUpdate::SERVING, ..options };
        let started = std::time::Instant::now();
        let report = engine.edit(&request, &options, &Silent).map_err(|e| match e {
            // The request's own fault: a refused sync, an id used twice, an id clash.
            Error::Config(message) => ApiError::bad_request("invalid_request", message),
            e @ Error::Input { .. } => ApiError::bad_request("invalid_request", e.to_string()),
            e => ApiError::internal(format!("the edit failed: {e}")),
        })?;
        drop(engine);
        let written = started.elapsed();
        if report.generation.is_some() {
            self.serve_edited(&report).map_err(|e| ApiError::internal(format!("serving the new generation: {e}")))?;
        }
        log::debug!(
            "edit of namespace {}: written in {:.1} ms, served after {:.1} ms; {:?}",
            self.namespace,
            written.as_secs_f64() * 1e3,
            started.elapsed().as_secs_f64() * 1e3,
            report.work
        );
        Ok(Edited { report, engine: self.engine() })
    }

    /// Serves the store's live generation if another process (or another server on the
    /// same database) has published a newer one; says whether it switched.
    pub fn follow_store(&self) -> Result<bool> {
        if self.editing.load(Ordering::Acquire) > 0 {
            return Ok(false);
        }
        let engine = self.engine();
        // A generation that only stored the walk this server solved already holds what it
        // serves: nothing to load.
        if engine.store.generation()?.is_none() || hoprag::store::is_live(engine.store.as_ref(), &engine.index)? {
            return Ok(false);
        }
        self.serve_live()
    }

    /// Loads the store's live generation (with its graph) and serves it from now on;
    /// says whether it switched. No lock is held while loading (the graph's structures
    /// are built on rayon): the loaded engine replaces the served one only if that is
    /// still the one it was loaded after, so of two requests that load concurrently the
    /// later generation is served either way.
    fn serve_live(&self) -> Result<bool> {
        self.serve_live_with(None, Engine::prepare)
    }

    /// [`Served::serve_live`] after this server's own edit, published without its walk:
    /// served with the edit's graph as it is in memory ([`Engine::reload_after`]), the
    /// walk solved and stored in the background ([`Engine::prepare_walk_in_background`]).
    pub fn serve_edited(&self, edit: &EditReport) -> Result<bool> {
        self.serve_live_with(Some(edit), Engine::prepare_walk_in_background)
    }

    fn serve_live_with(&self, edit: Option<&EditReport>, prepare: fn(&Engine) -> Result<()>) -> Result<bool> {
        loop {
            let served = self.engine();
            if served.store.generation()?.is_none() || hoprag::store::is_live(served.store.as_ref(), &served.index)? {
                return Ok(false);
            }
            let started = std::time::Instant::now();
            let next = Arc::new(match edit {
                Some(edit) => served.reload_after(edit)?,
                None => served.reload()?,
            });
            let loaded = started.elapsed();
            // Warmed before it is served (the old generation answers meanwhile), so that
            // no request waits for the new one's walk precomputation or triple index.
            prepare(&next)?;
            log::debug!(
                "serving a new generation of namespace {}: loaded in {:.1} ms, prepared in {:.1} ms",
                self.namespace,
                loaded.as_secs_f64() * 1e3,
                (started.elapsed() - loaded).as_secs_f64() * 1e3
            );
            let previous = self.engine.compare_and_swap(&served, next);
            if Arc::ptr_eq(&previous, &served) {
                served.supersede();
                return Ok(true);
            }
            // Another request swapped first: look again at what is live now.
        }
    }
}

/// Counts an edit in flight while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where the server's namespaces come from.
enum Source {
    /// A store named by a folder or URL: any namespace it holds.
    Store(String),
    /// One engine built in code ([`crate::Server::new`]): its default namespace only.
    Engine,
}

/// The namespaces a server has open, and how to open the others.
pub struct Namespaces {
    source: Source,
    /// Held only to find, insert or remove an entry, never while opening one.
    open: LazyMap<Namespace, Arc<Served>>,
    /// The embedder, configuration and LLM every namespace opened after the first shares
    /// ([`Engine::shared`]); the first namespace opened sets it.
    template: Mutex<Option<hoprag::engine::Shared>>,
    config: hoprag::Config,
    max_open: usize,
    clock: AtomicU64,
    /// Applied to the first engine opened (the server meters its LLM; later engines
    /// share that LLM).
    wrap: Box<dyn Fn(Engine) -> Engine + Send + Sync>,
}

impl Namespaces {
    /// The default namespace of one engine built in code, and no other.
    pub fn of_engine(engine: Engine) -> Result<Namespaces> {
        let config = engine.config.clone();
        let namespaces = Namespaces {
            source: Source::Engine,
            open: LazyMap::new(),
            template: Mutex::new(None),
            config,
            max_open: 1,
            clock: AtomicU64::new(0),
            wrap: Box::new(|e| e),
        };
        let served = Arc::new(Served::new(Namespace::default(), engine)?);
        namespaces.open.get_or_compute(Namespace::default(), || served);
        Ok(namespaces)
    }

    /// The namespaces of the store `spec` (a folder or a PostgreSQL URL), opened with
    /// `config` on first use, at most `max_open` at once; `wrap` prepares the first
    /// engine opened.
    pub fn of_store(
        spec: String,
        config: hoprag::Config,
        max_open: usize,
        wrap: Box<dyn Fn(Engine) -> Engine + Send + Sync>,
    ) -> Namespaces {
        Namespaces {
            source: Source::Store(spec),
            open: LazyMap::new(),
            template: Mutex::new(None),
            config,
            max_open: max_open.max(1),
            clock: AtomicU64::new(0),
            wrap,
        }
    }

    /// The namespace `namespace`, opened now if it is not open: an
    /// [`Error::NoNamespace`] when the store does not hold it (or holds no index in it).
    pub fn get(&self, namespace: &Namespace) -> Result<Arc<Served>> {
        let served = match self.open.get_or_try_compute(namespace.clone(), || self.open_one(namespace)) {
            Ok(served) => served,
            Err(e) => {
                // Names that fail to open are not kept: unknown names cannot fill memory.
                self.open.remove_if_unset(namespace);
                return Err(e);
            }
        };
        self.touch(&served);
        self.close_beyond_limit(namespace);
        Ok(served)
    }

    /// The namespace if it is open, marked as just used; opens nothing.
    pub fn get_open(&self, namespace: &Namespace) -> Option<Arc<Served>> {
        let served = self.open.get(namespace)?;
        self.touch(&served);
        Some(served)
    }

    /// The namespace if it is open, its place in the order of use left as it is (for
    /// listings and metrics, which are no use of it).
    pub fn peek(&self, namespace: &Namespace) -> Option<Arc<Served>> {
        self.open.get(namespace)
    }

    fn touch(&self, served: &Served) {
        served.last_used.store(self.clock.fetch_add(1, Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// The namespaces open now, by name.
    pub fn opened(&self) -> Vec<Arc<Served>> {
        let mut open = self.open.values();
        open.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        open
    }

    /// The namespaces the store holds (open or not), by name, the default first.
    pub fn list(&self) -> Result<Vec<Namespace>> {
        match &self.source {
            Source::Store(spec) => hoprag::store::namespaces(spec),
            Source::Engine => Ok(vec![Namespace::default()]),
        }
    }

    fn open_one(&self, namespace: &Namespace) -> Result<Arc<Served>> {
        let Source::Store(spec) = &self.source else {
            return Err(hoprag::store::namespace_not_found("this server", namespace));
        };
        let store = hoprag::store::open_in(spec, namespace, Open::Existing)?;
        if store.generation()?.is_none() {
            return Err(hoprag::store::namespace_not_found(&hoprag::store::redact(spec), namespace));
        }
        let template = self.template.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let started = std::time::Instant::now();
        let engine = match &template {
            Some(template) => template.open(store)?,
            None => (self.wrap)(Engine::open(store, self.config.clone())?),
        };
        let served = Arc::new(Served::new(namespace.clone(), engine)?);
        if template.is_none() {
            self.template
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| served.engine().shared());
        }
        log::info!(
            "opened namespace {namespace} ({} passages) in {:.0} ms",
            served.engine().index.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
        Ok(served)
    }

    /// Closes the least recently used namespaces beyond the limit, never `keep` (the
    /// one just asked for). Requests in flight keep the engines they hold; the memory
    /// goes when they finish.
    fn close_beyond_limit(&self, keep: &Namespace) {
        let mut open = self.open.values();
        if open.len() <= self.max_open {
            return;
        }
        open.sort_by_key(|s| s.last_used.load(Ordering::Relaxed));
        let excess = open.len() - self.max_open;
        for served in open.iter().filter(|s| &s.namespace != keep).take(excess) {
            self.open.remove(&served.namespace);
            log::info!("closed namespace {} (serve.max_open_namespaces = {})", served.namespace, self.max_open);
        }
    }
}

/// Loads the entity graph of an index that has one, so that requests (and engines made
/// for their options, which share it) never load it themselves, and an engine keeps
/// working after its generation's files are removed.
fn preload_graph(engine: &Engine) -> Result<()> {
    if engine.index.manifest.graph.is_some() {
        engine.graph()?;
    }
    Ok(())
}
