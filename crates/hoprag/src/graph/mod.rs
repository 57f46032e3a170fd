//! The knowledge graph: triples aligned to passages, normalised entity nodes, and the
//! entity graph that Personalized PageRank walks (entity–entity edges from triples,
//! passage–entity edges, and synonym edges between entities with similar embeddings).

pub mod beam;
mod build;
mod contextual;
pub mod export;
mod fact_vectors;
mod files;
mod heuristic;
pub mod linking;
mod llm_extract;
pub mod name;
mod normalize;
mod openie;
pub mod ppr;
pub mod split_ppr;
pub mod triple_index;
pub mod walk;

pub use crate::index::GraphStats;
pub use build::{GraphOptions, Previous};
pub use contextual::{fact_span, ReadOnce};
pub use fact_vectors::FactVectors;
pub use heuristic::extract_heuristic;
pub use llm_extract::{extract_llm, query_ner, LlmExtractOptions, LlmExtractReport};
pub use name::Name;
pub use normalize::normalize_entity;
pub use openie::import_openie;
pub use triple_index::{TripleGraph, TripleIndex, TripleIndexBuild};

use serde::{Deserialize, Serialize};

use crate::corpus::PassageIdx;
use crate::index::Matrix;
use crate::lazy::{Lazy, LazyMap};

/// A (subject, predicate, object) statement; it belongs to exactly one passage. Its
/// names are shared with every other triple naming the same ([`name`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Triple {
    pub passage: PassageIdx,
    pub subject: Name,
    pub predicate: Name,
    pub object: Name,
}

impl Triple {
    /// The text a triple is embedded and searched by: "subject predicate object".
    pub fn text(&self) -> String {
        format!("{} {} {}", self.subject, self.predicate, self.object)
    }
}

/// What an extractor or importer produced for a corpus.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Extraction {
    pub triples: Vec<Triple>,
    /// Entity mentions per passage (also those in no triple).
    pub entities: Vec<Vec<Name>>,
    pub report: ExtractReport,
}

impl Extraction {
    pub fn new(passages: usize) -> Self {
        Extraction { triples: Vec::new(), entities: vec![Vec::new(); passages], report: ExtractReport::default() }
    }
}

/// Counts of what could not be used; nothing is dropped silently.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExtractReport {
    pub docs: usize,
    pub malformed_triples: usize,
    pub malformed_entities: usize,
    /// Triples whose subject or object normalises to nothing, or to the same entity.
    pub degenerate_triples: usize,
    pub malformed_examples: Vec<String>,
    pub unmatched_docs: Vec<String>,
}

/// Kind of an entity–entity edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    Relation,
    Synonym,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Edge {
    pub a: u32,
    pub b: u32,
    pub weight: f32,
    pub kind: EdgeKind,
}

/// The entity graph of an index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntityGraph {
    /// Normalised names; the node id of an entity is its position.
    pub entities: Vec<String>,
    /// A surface form of each entity, for display and embedding.
    pub labels: Vec<String>,
    /// Entities mentioned by each passage.
    pub passage_entities: Vec<Vec<u32>>,
    /// Entity–entity edges, each once (a < b), relation weights summed over triples.
    pub edges: Vec<Edge>,
    pub triples: Vec<Triple>,
    /// (subject, object) entity ids of each triple, where both normalise to entities.
    pub triple_entities: Vec<Option<(u32, u32)>>,
    /// The fact of each triple: triples with the same text (one statement made in many
    /// passages) share a fact and its one vector. Absent in graphs written before facts
    /// were shared, where each triple is its own fact.
    #[serde(default)]
    pub triple_facts: Vec<u32>,
    /// The entity mentions the extraction found in each passage (also those in no
    /// triple): with the triples, everything an edit needs to rebuild the graph of the
    /// passages it keeps without extracting them again. Absent in older graphs.
    #[serde(default)]
    pub mentions: Vec<Vec<Name>>,
    /// The options the graph was built with, which an edit builds it with again.
    #[serde(default)]
    pub options: GraphOptions,
    pub stats: GraphStats,
    #[serde(skip)]
    pub entity_vectors: std::sync::Arc<Matrix>,
    /// The embedding of each fact's text.
    #[serde(skip)]
    pub fact_vectors: std::sync::Arc<Matrix>,
    /// The embedder of `entity_vectors` and `fact_vectors`, as the build recorded it
    /// (the manifest keeps it; a graph read back has `None`).
    #[serde(skip)]
    pub embedder: Option<crate::index::EmbedderInfo>,
    /// The passage seeds' walk solved on the entities ([`split_ppr::Solved`]), computed
    /// when the graph was attached to its index and stored with it; `None` for graphs
    /// stored before, or not yet attached: the first query then computes it.
    #[serde(skip)]
    pub walk: Option<std::sync::Arc<split_ppr::Solved>>,
    #[serde(skip)]
    entity_index: std::collections::HashMap<String, u32>,
    /// The first triple of each fact.
    #[serde(skip)]
    fact_triples: Vec<u32>,
    /// The entity of each name id (`build::Names`), as the build saw them: an edit's
    /// build looks its names up here instead of normalising them again.
    #[serde(skip)]
    name_entities: Vec<u32>,
    /// The fact of each (subject, predicate, object) of names, as the build found them.
    #[serde(skip)]
    facts_by_names: rustc_hash::FxHashMap<(u32, u32, u32), u32>,
    /// Names this graph among those of the process (see [`Lineage`]).
    #[serde(skip)]
    token: u64,
    /// Where an edit's graph took its entities and facts from, for the structures built
    /// on it to copy what they derive from them instead of deriving it again.
    #[serde(skip)]
    lineage: Option<std::sync::Arc<Lineage>>,
}

/// What an edit's graph ([`EntityGraph::build_after`]) kept of the graph it was built
/// from: for each entity and fact, the one of the previous graph with the same text and
/// the same vector (to the bit), if any. Everything a structure derives from a text or a
/// vector alone can then be copied across an edit instead of computed again.
#[derive(Debug)]
pub struct Lineage {
    previous: u64,
    pub entities: Vec<Option<u32>>,
    pub facts: Vec<Option<u32>>,
}

/// FNV-1a of `bytes`: a text's hash for the tables that group facts by text (each match
/// is confirmed by comparing the texts).
pub(crate) fn text_hash(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn next_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl EntityGraph {
    pub fn entity_id(&self, normalised: &str) -> Option<u32> {
        self.entity_index.get(normalised).copied()
    }

    /// The entity name `name` normalises to, if any: the one the build found for it where
    /// it saw the name (no normalising again), else by its normalised key.
    pub fn entity_of_name(&self, name: Name) -> Option<u32> {
        match self.name_entities.get(name.id() as usize).copied() {
            Some(build::Names::NONE) => None,
            Some(e) if e != build::Names::UNSEEN => Some(e),
            _ => self.entity_id(&normalize_entity(&name)),
        }
    }

    /// The fact of each (subject, predicate, object) of names: the build's table, or one
    /// made from the triples for a graph read back (which keeps none).
    pub(crate) fn facts_by_names(&self) -> std::borrow::Cow<'_, rustc_hash::FxHashMap<(u32, u32, u32), u32>> {
        if !self.facts_by_names.is_empty() || self.triples.is_empty() {
            return std::borrow::Cow::Borrowed(&self.facts_by_names);
        }
        let key = |t: &Triple| (t.subject.id(), t.predicate.id(), t.object.id());
        std::borrow::Cow::Owned(self.triples.iter().zip(&self.triple_facts).map(|(t, &f)| (key(t), f)).collect())
    }

    /// The fact triple `t` states.
    pub fn fact_of(&self, t: u32) -> u32 {
        self.triple_facts[t as usize]
    }

    /// The (unit) embedding of triple `t`'s text: its fact's.
    pub fn triple_vector(&self, t: u32) -> &[f32] {
        self.fact_vectors.row(self.fact_of(t))
    }

    /// Distinct facts (rows of `fact_vectors`).
    pub fn fact_count(&self) -> usize {
        self.fact_triples.len()
    }

    /// The first triple stating fact `f`.
    pub fn fact_triple(&self, f: u32) -> u32 {
        self.fact_triples[f as usize]
    }

    /// Assembles a graph a store has read back (the entity lookup is rebuilt).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn from_parts(parts: GraphParts) -> std::result::Result<EntityGraph, String> {
        let GraphParts {
            entities,
            labels,
            passage_entities,
            edges,
            triples,
            triple_entities,
            triple_facts,
            mentions,
            options,
            stats,
            entity_vectors,
            fact_vectors,
        } = parts;
        let mut g = EntityGraph {
            entities,
            labels,
            passage_entities,
            edges,
            triples,
            triple_entities,
            triple_facts,
            mentions,
            options,
            stats,
            entity_vectors,
            fact_vectors,
            embedder: None,
            walk: None,
            entity_index: Default::default(),
            fact_triples: Vec::new(),
            name_entities: Vec::new(),
            facts_by_names: Default::default(),
            token: 0,
            lineage: None,
        };
        g.reindex()?;
        Ok(g)
    }

    /// Rebuilds the lookups that are not stored, and checks the triples' facts: each
    /// triple names one, and each fact has a triple and a vector.
    pub(crate) fn reindex(&mut self) -> std::result::Result<(), String> {
        self.token = next_token();
        self.entity_index = self.entities.iter().enumerate().map(|(i, e)| (e.clone(), i as u32)).collect();
        if self.triple_facts.is_empty() {
            self.triple_facts = (0..self.triples.len() as u32).collect();
        }
        if self.triple_facts.len() != self.triples.len() {
            return Err(format!("{} triple facts for {} triples", self.triple_facts.len(), self.triples.len()));
        }
        let facts = self.triple_facts.iter().max().map_or(0, |&f| f as usize + 1);
        let mut first = vec![u32::MAX; facts];
        for (t, &f) in self.triple_facts.iter().enumerate().rev() {
            first[f as usize] = t as u32;
        }
        if let Some(f) = first.iter().position(|&t| t == u32::MAX) {
            return Err(format!("fact {f} is stated by no triple"));
        }
        if self.fact_vectors.rows() != facts {
            return Err(format!("{} fact vectors for {facts} facts", self.fact_vectors.rows()));
        }
        self.fact_triples = first;
        Ok(())
    }

    /// How this graph was built from `previous`, when an edit built it from that graph.
    pub fn lineage_from(&self, previous: &EntityGraph) -> Option<&Lineage> {
        self.lineage.as_deref().filter(|l| l.previous == previous.token && previous.token != 0)
    }

    /// Passages that mention each entity (inverse of `passage_entities`).
    pub fn entity_passages(&self) -> Vec<Vec<PassageIdx>> {
        let mut out = vec![Vec::new(); self.entities.len()];
        for (p, ents) in self.passage_entities.iter().enumerate() {
            for &e in ents {
                out[e as usize].push(p as PassageIdx);
            }
        }
        out
    }
}

/// What a store reads back of a graph: [`EntityGraph`]'s stored fields, for
/// [`EntityGraph::from_parts`].
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) struct GraphParts {
    pub entities: Vec<String>,
    pub labels: Vec<String>,
    pub passage_entities: Vec<Vec<u32>>,
    pub edges: Vec<Edge>,
    pub triples: Vec<Triple>,
    pub triple_entities: Vec<Option<(u32, u32)>>,
    pub triple_facts: Vec<u32>,
    pub mentions: Vec<Vec<Name>>,
    pub options: GraphOptions,
    pub stats: GraphStats,
    pub entity_vectors: std::sync::Arc<Matrix>,
    pub fact_vectors: std::sync::Arc<Matrix>,
}

/// What query-time graph methods need, built once per opened index.
pub struct GraphContext {
    pub linker: linking::Linker,
    /// The embedder of the graph's entity and fact vectors where it is not the index's
    /// (`--graph-embedder`); `None`: the question's passage-space vector serves both.
    pub embedder: Option<std::sync::Arc<dyn crate::embed::Embedder>>,
    pub ppr: ppr::PprGraph,
    /// GEAR's triple index, built when a method first asks for it.
    triples: Lazy<std::sync::Arc<TripleIndex>>,
    /// Set once [`GraphContext::index_triples_after`] builds the triple index behind the
    /// served context.
    triples_behind: std::sync::atomic::AtomicBool,
    /// The newest triple index finished along the edits that led here, until this
    /// context's own is: what the next edit's index is built from when this one's is not
    /// ready (an index is built from any earlier one: facts match by their names).
    triples_source: std::sync::Mutex<Option<std::sync::Arc<TripleIndex>>>,
    /// The walk of the passage seeds (split_ppr), computed when `ppr` first needs it.
    passage_response: LazyMap<PassageResponseKey, PassageResponseState>,
    /// Set while the passage seeds' walk is solved on a thread of its own (a server's
    /// freshly edited generation): queries then run the full walk, which ranks the same,
    /// instead of waiting for it.
    pub walk_in_background: std::sync::atomic::AtomicBool,
    /// Set once a newer generation is served instead: a walk solved in the background
    /// for this one is given up (nobody would store or read it).
    superseded: std::sync::atomic::AtomicBool,
    /// The newest solution of the passage seeds' walk on this graph: stored with it,
    /// solved behind it, or deferred from the generation before ([`Solved::defer`]),
    /// which the next edit's deferred walk starts from.
    solution: std::sync::Mutex<Option<std::sync::Arc<split_ppr::Solved>>>,
    /// A deferred walk's response, served while the walk is solved behind it: proven
    /// rankings at the cost of one column's push per query, where the full walk would
    /// run instead.
    deferred: std::sync::Mutex<Option<(PassageResponseKey, std::sync::Arc<split_ppr::PassageResponse>)>>,
    /// The context this one's graph was edited from and that generation's passages,
    /// until the deferred walk is made from them ([`GraphContext::defer_walk`]).
    edited_from: std::sync::Mutex<Option<EditedFrom>>,
    /// Set while this context's deferred walk is being made: the next edit's waits for
    /// it rather than finding no walk to start from.
    pub deferring: std::sync::atomic::AtomicBool,
}

/// For each passage of the second list, the passage of the first with the same title
/// and text, if any (the edit layer's rule: `crate::store::edit::kept_passages`).
pub type KeptPassages<'a> = &'a dyn Fn(&crate::index::Passages, &crate::index::Passages) -> Vec<Option<PassageIdx>>;

/// What a deferred walk is made from: the previous generation's graph context (its walk
/// graph and newest solution) and its passages (which of them the edit kept).
type EditedFrom = (std::sync::Arc<GraphContext>, std::sync::Arc<crate::index::Index>);

fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a passage response is for: the passage vectors (by address and size: one engine
/// keeps one matrix) and the damping.
type PassageResponseKey = (usize, usize, u64);
/// `None`: the graph is not one the split covers.
type PassageResponseState = Option<std::sync::Arc<split_ppr::PassageResponse>>;

/// Graph contexts alive in the process: each holds a whole graph's structures, so a
/// server should hold one or two (debug-logged as they come and go).
static CONTEXTS_ALIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for GraphContext {
    fn drop(&mut self) {
        let alive = CONTEXTS_ALIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed) - 1;
        log::debug!("a graph context of {} entities dropped: {alive} alive", self.graph().entities.len());
    }
}

impl GraphContext {
    pub fn new(graph: std::sync::Arc<EntityGraph>) -> Self {
        Self::with_linker(graph, None)
    }

    fn with_linker(graph: std::sync::Arc<EntityGraph>, previous: Option<&linking::Linker>) -> Self {
        // The linker and the walk's adjacency are independent: built side by side, an
        // edit's context is ready in the time of the longer one.
        // `rayon::join`: this may run on a pool worker, which must not block on a thread
        // that needs the pool.
        let (linker, ppr) = rayon::join(
            || linking::Linker::after(graph.clone(), previous),
            || ppr::PprGraph::from_entity_graph(&graph),
        );
        let alive = CONTEXTS_ALIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        log::debug!("a graph context of {} entities made: {alive} alive", graph.entities.len());
        GraphContext {
            linker,
            embedder: None,
            ppr,
            triples: Default::default(),
            triples_behind: Default::default(),
            triples_source: Default::default(),
            passage_response: Default::default(),
            walk_in_background: Default::default(),
            superseded: Default::default(),
            solution: Default::default(),
            deferred: Default::default(),
            edited_from: Default::default(),
            deferring: Default::default(),
        }
    }

    /// A context for `graph`, an edit's result of `previous`'s graph, reusing what
    /// depends on a row's values alone (the linker's int8 codes): the same context
    /// [`GraphContext::new`] gives. GEAR's triple index is left to
    /// [`GraphContext::index_triples_after`].
    pub fn after(graph: std::sync::Arc<EntityGraph>, previous: Option<&GraphContext>) -> Self {
        GraphContext::with_linker(graph, previous.map(|p| &p.linker))
    }

    /// Builds GEAR's triple index on a thread of its own if `previous` (the context this
    /// one's graph was edited from) has built one, or was building one from an earlier
    /// index, reusing that index's token counts and BM25 parts: an edit is served without
    /// waiting for it, and a query that needs it meanwhile waits for this build rather
    /// than starting its own ([`crate::lazy`]). The index is the one
    /// [`GraphContext::triple_index`] would build. Built from the newest index finished
    /// (not waiting for the previous edit's, as a chain of builds would make the newest
    /// generation's GEAR queries wait along it); none at all without one, when the first
    /// GEAR query builds the index whole.
    pub fn index_triples_after(
        self: &std::sync::Arc<Self>,
        previous: std::sync::Arc<GraphContext>,
        embedder: std::sync::Arc<dyn crate::embed::Embedder>,
    ) {
        let lock = |m: &std::sync::Mutex<Option<std::sync::Arc<TripleIndex>>>| {
            m.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
        };
        let Some(source) = previous.triples.get().cloned().or_else(|| lock(&previous.triples_source)) else {
            return;
        };
        drop(previous);
        *self.triples_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(source.clone());
        self.triples_behind.store(true, std::sync::atomic::Ordering::Release);
        let this = self.clone();
        let build = move || {
            // Superseded before it started: a newer generation builds from `source`.
            if this.superseded.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            let started = std::time::Instant::now();
            let built = this.triples.get_or_try_compute(|| {
                TripleIndex::build_after(this.graph(), embedder.as_ref(), Some(&source)).map(std::sync::Arc::new)
            });
            match &built {
                Ok(index) => {
                    log::debug!(
                        "GEAR's triple index of the edited graph: {:.0} ms ({:?})",
                        started.elapsed().as_secs_f64() * 1e3,
                        index.build
                    );
                    // Its own is the source of the next edit's now.
                    *this.triples_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                }
                Err(e) => log::warn!("GEAR's triple index of the edited graph: {e}; built when first asked for"),
            }
        };
        if let Err(e) = std::thread::Builder::new().name("hoprag-triple-index".into()).spawn(build) {
            log::warn!("no thread for the edited graph's triple index ({e}); built when first asked for");
        }
    }

    /// The passage seeds' walk for `passages`, assembled on first use from the solution
    /// stored with the graph, or computed where there is none (callers meanwhile wait
    /// for it: see [`crate::lazy`]), and then shared; `None` when the graph is not one
    /// of passages linked to entities only, or the walk does not converge. Computed in the
    /// query that first needs it, not in the background, so that every query of an index
    /// takes the same path and gets the same scores, warm or not: the first one pays it
    /// once (`Engine::prepare` pays it ahead; 74 s at 100,000 scale-benchmark passages on
    /// a loaded 2-core host: docs/scale.md).
    pub fn passage_response(
        &self,
        passages: &crate::index::Matrix,
        damping: f64,
    ) -> Option<std::sync::Arc<split_ppr::PassageResponse>> {
        let key = Self::response_key(passages, damping);
        let e = self.graph().entities.len();
        self.passage_response.get_or_compute(key, || {
            use split_ppr::{Form, PassageResponse};
            // The stored solution where it is this walk's (the index's own vectors: the
            // graph was attached to this index; the default damping), else solved now.
            let stored = self.graph().walk.as_ref().filter(|w| w.damping() == damping);
            log::debug!(
                "the passage seeds' walk {} on thread {:?}",
                if stored.is_some() { "read" } else { "solved" },
                std::thread::current().name()
            );
            stored
                .and_then(|w| PassageResponse::from_solved(&self.ppr, e, passages, w, Form::Auto))
                .or_else(|| PassageResponse::compute(&self.ppr, e, passages, damping))
                .map(std::sync::Arc::new)
        })
    }

    /// The passage seeds' walk if it is ready; `None` (never waiting) while it is being
    /// solved in the background ([`GraphContext::solve_walk`]) or if it does not exist.
    pub fn passage_response_if_ready(
        &self,
        passages: &crate::index::Matrix,
        damping: f64,
    ) -> Option<std::sync::Arc<split_ppr::PassageResponse>> {
        let key = Self::response_key(passages, damping);
        let solved = self.passage_response.get(&key).flatten();
        solved.or_else(|| locked(&self.deferred).as_ref().filter(|(k, _)| *k == key).map(|(_, r)| r.clone()))
    }

    /// Whether the walk of `passages` is solved (not only deferred): stored, or solved
    /// behind the served generation.
    pub fn walk_solved(&self, passages: &crate::index::Matrix, damping: f64) -> bool {
        self.passage_response.get(&Self::response_key(passages, damping)).flatten().is_some()
    }

    /// The newest solution of the passage seeds' walk on this graph, if any.
    pub fn solution(&self) -> Option<std::sync::Arc<split_ppr::Solved>> {
        locked(&self.solution).clone().or_else(|| self.graph().walk.clone())
    }

    /// Records that this context's graph is `previous`'s edited (`index`, its
    /// generation's), for [`GraphContext::defer_walk`]. `previous` holds what it was
    /// edited from only until its own deferred walk is made (or it is superseded before
    /// making it, when this one's starts from that instead): a chain as long as the
    /// edits that came faster than deferred walks, never longer.
    pub fn edited_from(&self, previous: std::sync::Arc<GraphContext>, index: std::sync::Arc<crate::index::Index>) {
        *locked(&self.edited_from) = Some((previous, index));
    }

    /// Whether this context knows the one its graph was edited from (until its deferred
    /// walk is made).
    pub fn is_edited(&self) -> bool {
        locked(&self.edited_from).is_some()
    }

    /// Lets go of the context this one was edited from, if held.
    pub fn forget_edited_from(&self) {
        locked(&self.edited_from).take();
    }

    /// Serves this graph's walk deferred from the generation it was edited from
    /// ([`GraphContext::edited_from`]; `index`, this generation's passages): the
    /// previous solution's values moved here, the residuals of the rows the edit
    /// changed pushed by each query ([`split_ppr::Solved::defer`]), until a solved walk
    /// is ready. Lets go of the previous generation either way. `Err` says why not (the
    /// queries then run the full walk).
    pub fn defer_walk(
        &self,
        index: &crate::index::Index,
        damping: f64,
        kept: KeptPassages<'_>,
    ) -> Result<split_ppr::RepairStats, String> {
        let waiting = std::time::Instant::now();
        let (mut previous, mut previous_index) =
            locked(&self.edited_from).clone().ok_or("not edited from a served graph")?;
        // The generation before may be making its own deferred walk (edits faster than
        // deferred walks): waited for. One superseded before it made one is skipped: its
        // own origin is the start (origins are found between any two generations: entities
        // by key, passages by content).
        let old = loop {
            if self.superseded.load(std::sync::atomic::Ordering::Acquire) {
                // Left for the next generation's, which starts from this one's origin.
                return Err("superseded before it was made".into());
            }
            if let Some(old) = previous.solution() {
                break old;
            }
            if previous.deferring.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            let before = locked(&previous.edited_from).clone().ok_or("the graph before has no walk")?;
            (previous, previous_index) = before;
        };
        locked(&self.edited_from).take();
        if waiting.elapsed().as_secs_f64() > 0.05 {
            log::debug!("deferred walk: waited {:.0} ms for one before", waiting.elapsed().as_secs_f64() * 1e3);
        }
        if old.damping() != damping {
            return Err(format!("the walk before is at damping {}, not {damping}", old.damping()));
        }
        let graph = self.graph();
        let passages = index.vectors();
        // At the serving priority: on the low-priority threads the full walks it spares
        // starved it (at 100,000 passages, 39–48 s instead of 5–6 s; docs/scale.md).
        let t = std::time::Instant::now();
        let entities: Vec<Option<u32>> = graph.entities.iter().map(|k| previous.graph().entity_id(k)).collect();
        let kept = kept(previous_index.passages(), index.passages());
        let origins = split_ppr::Origins { entities: &entities, passages: &kept };
        let (e, form) = (entities.len(), split_ppr::Form::Auto);
        let (response, deferred, stats) =
            split_ppr::PassageResponse::deferred(&old, &previous.ppr, &self.ppr, e, &origins, passages, form)?;
        let response_secs = t.elapsed().as_secs_f64() - stats.secs;
        drop((previous, previous_index, old));
        log::debug!(
            "deferred walk: compared in {:.0} ms, residuals in {:.0} ms, response in {:.0} ms",
            stats.compare_secs * 1e3,
            (stats.secs - stats.compare_secs) * 1e3,
            response_secs * 1e3
        );
        let key = Self::response_key(passages, damping);
        // A solve that finished meanwhile is newer: kept.
        let mut solution = locked(&self.solution);
        if solution.is_none() {
            *solution = Some(std::sync::Arc::new(deferred));
            *locked(&self.deferred) = Some((key, std::sync::Arc::new(response)));
        }
        Ok(stats)
    }

    /// Solves the passage seeds' walk for `passages` (the graph holds no stored one) and
    /// keeps it, exactly as a query would assemble it from a stored solution; returns the
    /// solution, for the store. `None` if the graph already has one for this damping, or
    /// the split does not cover the graph.
    pub fn solve_walk(
        &self,
        passages: &crate::index::Matrix,
        damping: f64,
    ) -> Option<std::sync::Arc<split_ppr::Solved>> {
        if self.graph().walk.as_ref().is_some_and(|w| w.damping() == damping) {
            return None;
        }
        let e = self.graph().entities.len();
        let superseded = || self.superseded.load(std::sync::atomic::Ordering::Acquire);
        let solved = split_ppr::Solved::solve_unless(&self.ppr, e, passages, damping, &superseded)?;
        let key = Self::response_key(passages, damping);
        self.passage_response.get_or_compute(key, || {
            split_ppr::PassageResponse::from_solved(&self.ppr, e, passages, &solved, split_ppr::Form::Auto)
                .map(std::sync::Arc::new)
        });
        let solved = std::sync::Arc::new(solved);
        *locked(&self.solution) = Some(solved.clone());
        locked(&self.deferred).take();
        Some(solved)
    }

    /// Marks the context as no longer served: a walk being solved for it in the
    /// background stops ([`GraphContext::solve_walk`] then returns `None`).
    pub fn supersede(&self) {
        self.superseded.store(true, std::sync::atomic::Ordering::Release);
    }

    fn response_key(passages: &crate::index::Matrix, damping: f64) -> PassageResponseKey {
        (passages.address(), passages.rows(), damping.to_bits())
    }

    pub fn graph(&self) -> &EntityGraph {
        &self.linker.graph
    }

    /// Whether GEAR's triple index is built, or being built behind the served context.
    pub fn triple_index_started(&self) -> bool {
        self.triples.get().is_some() || self.triples_behind.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The triple index, built on first use (callers meanwhile wait for it rather than
    /// build their own; see [`crate::lazy`]), from the index of an earlier edit where
    /// this context holds one.
    pub fn triple_index(&self, embedder: &dyn crate::embed::Embedder) -> crate::Result<std::sync::Arc<TripleIndex>> {
        self.triples
            .get_or_try_compute(|| {
                let source = self.triples_source.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
                TripleIndex::build_after(self.graph(), embedder, source.as_deref()).map(std::sync::Arc::new)
            })
            .cloned()
    }
}
