//! A generation derived from the one before an edit: the same function of its passages
//! as a fresh build, with what the edit did not touch taken from the old generation
//! instead of computed again.
//!
//! A fresh build embeds every passage, extracts every passage's triples, embeds every
//! entity label and fact text, and links synonyms over all entities. An edit embeds only
//! texts no vector is stored for (vectors are a function of the text alone: the encoders
//! compute each passage-kind text the same whatever batch it is in), extracts only the
//! passages it adds, and otherwise runs the same code on the same inputs in the same
//! (canonical) order: the graph, the lexical index and the walk come out as a fresh build
//! of the same passages would make them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::corpus::{Passage, PassageIdx};
use crate::embed::{embed_passages, Embedder, TextKind};
use crate::error::{Error, Result};
use crate::graph::ppr::{PprGraph, PprParams};
use crate::graph::split_ppr::{Origins, RepairStats, Solved};
use crate::graph::{extract_heuristic, EntityGraph, Extraction, Previous, Triple};
use crate::index::{Index, Matrix, Passages, Source};
use crate::progress::Progress;

/// Where an edit's time went and what it had to compute, for reports.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EditWork {
    /// Passages embedded (those whose text no stored vector has).
    pub passages_embedded: usize,
    /// Entity labels and fact texts embedded for the graph.
    pub graph_texts_embedded: usize,
    /// Passages whose triples were extracted (the others' were kept).
    pub passages_extracted: usize,
    pub plan_secs: f64,
    pub embed_secs: f64,
    pub graph_secs: f64,
    pub walk_secs: f64,
    pub lexical_secs: f64,
    pub write_secs: f64,
    /// The published generation assembled in memory for the caller to serve (its
    /// approximate index copied and updated), where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assemble_secs: Option<f64>,
    pub total_secs: f64,
    /// What repairing the walk did ([`WalkUpdate::Repair`]); `None` where it was solved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_repair: Option<RepairStats>,
    /// Why the walk was solved instead of repaired, where a repair was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_repair_declined: Option<String>,
}

/// Vectors computed during an edit, kept across its retries (a retry happens when another
/// writer published while this one computed): nothing is embedded twice.
#[derive(Default)]
pub(super) struct Fresh {
    passages: Mutex<HashMap<String, Arc<[f32]>>>,
    graph: Mutex<HashMap<String, Arc<[f32]>>>,
}

/// Whether the edit solves the passage seeds' walk of the new graph before publishing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WalkUpdate {
    /// Solved and stored with the generation, as a fresh build does (seconds at 6,000
    /// passages).
    Solve,
    /// Not stored: graph methods run the exact full walk (same rankings) until a later
    /// write stores one, e.g. `hoprag graph --walk`.
    Defer,
    /// The old generation's stored walk brought up to date by local work
    /// ([`Solved::repair`]) within a looser stated per-node bound: a ranking the bound
    /// separates is the full walk's, and one it does not runs the full walk, so graph
    /// methods rank as the full walk does; where the edit reaches too much of the graph for that to pay,
    /// solved again from the old values ([`Solved::solve_warm`]: the solve's stopping
    /// rule, fewer iterations), and from scratch where the old graph stores no walk. The
    /// stored walk differs from a fresh build's within its bounds, so its bytes do too.
    Repair,
}

impl WalkUpdate {
    /// A server's edits (`hoprag serve`, `hoprag bench scale --edits`): served at once,
    /// the walk solved on a thread of its own meanwhile
    /// ([`crate::Engine::prepare_walk_in_background`]), graph queries running the full
    /// walk until it lands. Not [`WalkUpdate::Repair`]: a repair costs a third to a half of
    /// a solve on 2wiki-corpus and declines on the scale benchmark's graph (one addition
    /// changes most entities' equations: docs/scale.md), and the edit would not be served
    /// until it ended.
    pub const SERVING: WalkUpdate = WalkUpdate::Defer;
}

/// The entity graph of `passages` (with `vectors`, their vectors) as a fresh build makes
/// it, from `old_graph` (the old generation's), and the source the manifest records.
#[allow(clippy::too_many_arguments)]
pub(super) fn graph(
    old_passages: &[Passage],
    old_graph: &EntityGraph,
    graph_source: Option<&str>,
    passages: &[Passage],
    kept: &[Option<PassageIdx>],
    vectors: &Matrix,
    graph_embedder: &dyn Embedder,
    walk: WalkUpdate,
    fresh: &Fresh,
    work: &mut EditWork,
    progress: &dyn Progress,
) -> Result<(Arc<EntityGraph>, String)> {
    let t = Instant::now();
    let source = graph_source.unwrap_or("heuristic");
    let (extraction, source) = extraction(old_passages, old_graph, source, passages, work)?;
    log::debug!("edit: extraction {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let cached = CachedEmbedder::new(graph_embedder, &fresh.graph);
    let previous = Previous { graph: old_graph, passages: kept };
    let mut graph =
        EntityGraph::build_after(passages, extraction, &cached, &old_graph.options, Some(previous), progress)?;
    work.graph_texts_embedded += cached.embedded();
    work.graph_secs += t.elapsed().as_secs_f64();
    let t = Instant::now();
    graph.walk = match walk {
        WalkUpdate::Solve => solved(&graph, vectors),
        WalkUpdate::Defer => None,
        WalkUpdate::Repair => repaired(old_graph, &graph, kept, vectors, work),
    };
    work.walk_secs += t.elapsed().as_secs_f64();
    Ok((Arc::new(graph), source))
}

/// Passages up to which a delta generation's walk is solved when its graph is derived
/// (under a second on two cores), not repaired.
const SOLVE_WALK_UP_TO: usize = 2_000;

/// How a reader of delta generation `index` brings its walk up to date: a small graph's
/// is solved as a fresh build solves it (then its scores are the fresh build's to the
/// bit); a larger one's repaired from the base's, its rankings proven against the full
/// walk's.
pub fn delta_walk(index: &Index) -> WalkUpdate {
    if index.len() <= SOLVE_WALK_UP_TO {
        WalkUpdate::Solve
    } else {
        WalkUpdate::Repair
    }
}

/// The entity graph of delta generation `index` ([`crate::store::delta`]), derived from
/// its full generation's, `base_graph`, as an edit derives it, its walk updated as `walk`
/// says. `embedder` (the graph's) embeds what the base's graph has no vector for.
pub fn delta_graph(
    index: &Index,
    base_graph: &EntityGraph,
    embedder: &dyn Embedder,
    walk: WalkUpdate,
) -> Result<EntityGraph> {
    let derived = index.derived().ok_or_else(|| Error::Other("not a delta generation".into()))?;
    let kept = kept_passages(&derived.base_passages, index.passages());
    let source = index.manifest.graph.as_ref().map(|g| g.source.as_str());
    let mut work = EditWork::default();
    let (graph, _) = graph(
        &derived.base_passages.contiguous(),
        base_graph,
        source,
        &index.passages().contiguous(),
        &kept,
        index.vectors(),
        embedder,
        walk,
        &Fresh::default(),
        &mut work,
        &crate::progress::Silent,
    )?;
    log::debug!("delta generation {}: graph derived: {work:?}", index.generation());
    Ok(Arc::try_unwrap(graph).unwrap_or_else(|shared| (*shared).clone()))
}

/// The walk of `graph` solved from scratch, as a fresh build solves it.
pub(super) fn solved(graph: &EntityGraph, vectors: &Matrix) -> Option<Arc<Solved>> {
    let ppr = PprGraph::from_entity_graph(graph);
    Solved::solve(&ppr, graph.entities.len(), vectors, PprParams::default().damping).map(Arc::new)
}

/// `old`'s stored walk repaired for `graph` (entities matched by key, passages by
/// `kept`, whose vectors are the old ones); where the repair declines, solved again from
/// the old values ([`Solved::solve_warm`]), and where `old` stores no walk, from scratch.
fn repaired(
    old: &EntityGraph,
    graph: &EntityGraph,
    kept: &[Option<PassageIdx>],
    vectors: &Matrix,
    work: &mut EditWork,
) -> Option<Arc<Solved>> {
    let Some(stored) = old.walk.as_deref().filter(|w| w.damping() == PprParams::default().damping) else {
        work.walk_repair_declined = Some("the old graph stores no walk".into());
        return solved(graph, vectors);
    };
    let entities: Vec<Option<u32>> = graph.entities.iter().map(|key| old.entity_id(key)).collect();
    let origins = Origins { entities: &entities, passages: kept };
    let (old_ppr, ppr) = rayon::join(|| PprGraph::from_entity_graph(old), || PprGraph::from_entity_graph(graph));
    match stored.repair(&old_ppr, &ppr, graph.entities.len(), &origins, vectors) {
        Ok((solved, stats)) => {
            log::debug!("edit: walk repaired: {stats:?}");
            work.walk_repair = Some(stats);
            return Some(Arc::new(solved));
        }
        Err(why) => {
            log::info!("edit: the walk is solved again from the old one, not repaired: {why}");
            work.walk_repair_declined = Some(why);
        }
    }
    let e = graph.entities.len();
    let warm = stored.solve_warm(&ppr, e, &entities, vectors);
    warm.or_else(|| Solved::solve(&ppr, e, vectors, PprParams::default().damping)).map(Arc::new)
}

/// For each passage, a passage of `old` with the same title and text, each used once:
/// the one with its id where that one kept its title and text, else one of the others
/// the id match leaves over (a passage renamed, or its text moved). Where both lists are
/// layered on one base, a row of the base is the same passage in both and only the
/// added rows are looked up by id; otherwise both lists (in canonical order) are merged
/// by id. Only the edit's passages are hashed: a passage whose text equals another,
/// unchanged one's is embedded again (the same vector: a vector is a function of its
/// text).
pub fn kept_passages(old: &Passages, passages: &Passages) -> Vec<Option<PassageIdx>> {
    let same = |a: &Passage, b: &Passage| a.title == b.title && a.text == b.text;
    let mut kept = vec![None; passages.len()];
    let mut used = vec![false; old.len()];
    let mut keep = |j: usize, i: usize| {
        kept[j] = Some(i as PassageIdx);
        used[i] = true;
    };
    match passages.pieces().filter(|_| passages.same_base(old)) {
        Some(pieces) => {
            for (rows, run) in pieces.runs() {
                for (k, j) in rows.enumerate() {
                    let i = match run.source {
                        Source::Base => old_row_of_base(old, run.start as usize + k),
                        Source::Added => old.find(&passages[j].id).filter(|&i| same(&old[i], &passages[j])),
                    };
                    if let Some(i) = i {
                        keep(j, i);
                    }
                }
            }
        }
        None => {
            for (i, j) in same_ids(old, passages) {
                if same(&old[i], &passages[j]) {
                    keep(j, i);
                }
            }
        }
    }
    let mut of_content: HashMap<(&str, &str), Vec<PassageIdx>> = HashMap::new();
    for i in (0..old.len()).rev().filter(|&i| !used[i]) {
        let p = &old[i];
        of_content.entry((p.title.as_str(), p.text.as_str())).or_default().push(i as PassageIdx);
    }
    for (j, k) in kept.iter_mut().enumerate().filter(|(_, k)| k.is_none()) {
        let p = &passages[j];
        *k = of_content.get_mut(&(p.title.as_str(), p.text.as_str())).and_then(Vec::pop);
    }
    kept
}

/// Row `base_row` of `list`'s base, as a row of `list` (which holds every row of its base
/// that a list layered on it from `list` holds).
fn old_row_of_base(list: &Passages, base_row: usize) -> Option<usize> {
    match list.pieces() {
        Some(pieces) => pieces.row_of_base(base_row),
        None => Some(base_row),
    }
}

/// The pairs of rows `(i, j)` where `a[i]` and `b[j]` have the same id, both lists in
/// canonical order (a merge: no id is hashed).
fn same_ids<'a>(a: &'a Passages, b: &'a Passages) -> impl Iterator<Item = (usize, usize)> + 'a {
    let (mut a, mut b) = (a.iter().enumerate().peekable(), b.iter().enumerate().peekable());
    std::iter::from_fn(move || loop {
        let (&(i, p), &(j, q)) = (a.peek()?, b.peek()?);
        match p.id.cmp(&q.id) {
            std::cmp::Ordering::Less => _ = a.next(),
            std::cmp::Ordering::Greater => _ = b.next(),
            std::cmp::Ordering::Equal => {
                a.next();
                b.next();
                return Some((i, j));
            }
        }
    })
}

/// Each passage's vector: the stored one of its `kept` passage of the old generation
/// (the same title and text, so the same indexed text), else embedded (a vector is a
/// function of the indexed text alone). Where `passages` are layered on the base `old`
/// is (or is layered on), so are the vectors: the base's shared, only the added rows'
/// copied or embedded.
pub(super) fn vectors(
    old: &Index,
    passages: &Passages,
    kept: &[Option<PassageIdx>],
    embedder: &dyn Embedder,
    fresh: &Fresh,
    work: &mut EditWork,
    progress: &dyn Progress,
) -> Result<Matrix> {
    let started = Instant::now();
    // Only the passages the old generation lacks have their text built: an edit's few.
    let texts: HashMap<usize, String> =
        kept.iter().enumerate().filter(|(_, k)| k.is_none()).map(|(j, _)| (j, passages[j].index_text())).collect();
    let missing: Vec<String> = {
        let known = fresh.passages.lock().expect("no panics under the lock");
        let mut m: Vec<String> = texts.values().filter(|t| !known.contains_key(*t)).cloned().collect();
        m.sort_unstable();
        m.dedup();
        m
    };
    if !missing.is_empty() {
        let flat = embed_passages(embedder, &missing, 256, "embedding passages", progress)?;
        work.passages_embedded += missing.len();
        let mut known = fresh.passages.lock().expect("no panics under the lock");
        for (text, v) in missing.into_iter().zip(flat.chunks_exact(embedder.dim())) {
            known.insert(text, v.into());
        }
    }
    let known = fresh.passages.lock().expect("no panics under the lock");
    let vector = |j: usize| match kept[j] {
        Some(row) => old.vectors().row(row),
        None => &known[&texts[&j]],
    };
    let dim = embedder.dim();
    let base = match old.vectors().layers() {
        Some((base, _, _)) => Some(base.clone()),
        None if old.passages().pieces().is_none() => Some(old.vectors().clone()),
        None => None,
    };
    let m = match (passages.pieces(), base) {
        (Some(pieces), Some(base)) if passages.same_base(old.passages()) => {
            let mut added = Matrix::with_capacity(dim, passages.added().len());
            for j in pieces.added_rows() {
                added.push(vector(j));
            }
            Matrix::layered(base, pieces.clone(), added)
        }
        _ => {
            let mut m = Matrix::with_capacity(dim, passages.len());
            for j in 0..passages.len() {
                m.push(vector(j));
            }
            m
        }
    };
    work.embed_secs += started.elapsed().as_secs_f64();
    Ok(m)
}

/// The extraction of `passages`: each kept passage's triples and mentions as the old
/// graph holds them, new passages extracted the way the graph's source was (the heuristic
/// extractor; an imported or LLM-extracted graph gets the heuristic's triples for new
/// passages, recorded in the source it reports).
fn extraction(
    old_passages: &[Passage],
    old: &EntityGraph,
    source: &str,
    passages: &[Passage],
    work: &mut EditWork,
) -> Result<(Extraction, String)> {
    let complete = old.mentions.len() == old_passages.len();
    if !complete && source != "heuristic" {
        return Err(Error::Config(format!(
            "this index's graph (from {source}) was built by an older hoprag that did not keep each passage's \
             entity mentions, so an edit cannot rebuild it; rebuild the graph once with `hoprag graph`"
        )));
    }
    let mut triples_of: Vec<Vec<&Triple>> = vec![Vec::new(); old_passages.len()];
    for t in &old.triples {
        triples_of[t.passage as usize].push(t);
    }
    let by_content: HashMap<(&str, &str), usize> = if complete {
        old_passages.iter().enumerate().map(|(i, p)| ((p.title.as_str(), p.text.as_str()), i)).collect()
    } else {
        HashMap::new()
    };
    let kept: Vec<Option<usize>> =
        passages.iter().map(|p| by_content.get(&(p.title.as_str(), p.text.as_str())).copied()).collect();
    let new: Vec<Passage> = passages.iter().zip(&kept).filter(|(_, k)| k.is_none()).map(|(p, _)| p.clone()).collect();
    work.passages_extracted += new.len();
    let mut extracted = extract_heuristic(&new);
    let mut new_triples: Vec<Vec<Triple>> = vec![Vec::new(); new.len()];
    for t in extracted.triples.drain(..) {
        new_triples[t.passage as usize].push(t);
    }
    let mut out = Extraction::new(passages.len());
    out.report = extracted.report.clone();
    let mut next_new = 0;
    for (i, k) in kept.iter().enumerate() {
        let passage = i as PassageIdx;
        match k {
            Some(o) => {
                out.triples.extend(triples_of[*o].iter().map(|t| Triple { passage, ..(*t).clone() }));
                out.entities[i] = old.mentions[*o].clone();
            }
            None => {
                out.triples.extend(new_triples[next_new].drain(..).map(|t| Triple { passage, ..t }));
                out.entities[i] = std::mem::take(&mut extracted.entities[next_new]);
                next_new += 1;
            }
        }
    }
    Ok((out, source_after(source, !new.is_empty())))
}

/// The source a graph of `source` records once an edit `extracted` passages of its own
/// (the heuristic's triples, whatever the graph's came from).
pub(super) fn source_after(source: &str, extracted: bool) -> String {
    if source == "heuristic" || !extracted || source.ends_with("(edits: heuristic)") {
        source.to_string()
    } else {
        format!("{source} (edits: heuristic)")
    }
}

/// The graph's embedder with the vectors this edit computed already in front (kept
/// across its retries). The old graph's vectors are reused by the build itself
/// ([`EntityGraph::build_after`]).
struct CachedEmbedder<'a> {
    inner: &'a dyn Embedder,
    fresh: &'a Mutex<HashMap<String, Arc<[f32]>>>,
    embedded: std::sync::atomic::AtomicUsize,
}

impl<'a> CachedEmbedder<'a> {
    fn new(inner: &'a dyn Embedder, fresh: &'a Mutex<HashMap<String, Arc<[f32]>>>) -> Self {
        CachedEmbedder { inner, fresh, embedded: Default::default() }
    }

    fn embedded(&self) -> usize {
        self.embedded.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Embedder for CachedEmbedder<'_> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    /// Not cached: only the passages that state a fact first, new to the edit, are read.
    fn embed_spans(
        &self,
        texts: &[String],
        spans: &[Vec<std::ops::Range<usize>>],
    ) -> Option<Result<Vec<crate::embed::ReadText>>> {
        self.inner.embed_spans(texts, spans)
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[String], kind: TextKind) -> Result<Vec<Vec<f32>>> {
        let missing: Vec<String> = {
            let fresh = self.fresh.lock().expect("no panics under the lock");
            let mut m: Vec<String> = texts.iter().filter(|t| !fresh.contains_key(*t)).cloned().collect();
            m.sort_unstable();
            m.dedup();
            m
        };
        // Embedded without the lock held: the encoder's threads do the work.
        if !missing.is_empty() {
            let vectors = self.inner.embed(&missing, kind)?;
            self.embedded.fetch_add(missing.len(), std::sync::atomic::Ordering::Relaxed);
            let mut fresh = self.fresh.lock().expect("no panics under the lock");
            for (text, v) in missing.into_iter().zip(vectors) {
                fresh.insert(text, v.into());
            }
        }
        let fresh = self.fresh.lock().expect("no panics under the lock");
        Ok(texts.iter().map(|t| fresh[t].to_vec()).collect())
    }
}
