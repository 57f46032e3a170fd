//! An index's entity graph, built and attached as a new generation: the one operation
//! behind `hoprag graph`, the graph `hoprag index --graph` builds, and the Python
//! `Index.build(graph=True)`. Triples from an LLM are extracted by the caller
//! ([`crate::graph::extract_llm`]), who reports what they cost; everything after the
//! triples is here.

use std::path::Path;
use std::sync::Arc;

use super::{attach_graph, GraphAttached, Store};
use crate::corpus::PassageIdx;
use crate::embed::{load_embedder, Embedder, EmbedderSettings, EmbedderSpec};
use crate::error::Result;
use crate::graph::{
    extract_heuristic, import_openie, EntityGraph, ExtractReport, Extraction, FactVectors, GraphOptions, GraphStats,
    Previous,
};
use crate::index::{GraphBuildTimes, Index};
use crate::progress::Progress;

/// The triples of `index`'s passages without an LLM: from a HippoRAG OpenIE file (v1 or
/// v2) when one is given, else from the heuristic extractor; with the source the graph
/// records (the file's path, or `heuristic`).
pub fn triples_without_llm(index: &Index, openie: Option<&Path>) -> Result<(Extraction, String)> {
    Ok(match openie {
        Some(path) => (import_openie(path, index.passages().as_slice())?, path.display().to_string()),
        None => (extract_heuristic(index.passages().as_slice()), "heuristic".to_string()),
    })
}

/// The embedder of a graph's entity and fact vectors: `spec` when given (a composed
/// embedder's table named by its key, as a new index records it), else the default
/// beside the index's own embedder (MiniLM beside EmbeddingGemma, else the index's).
pub fn graph_embedder(
    index: &Index,
    spec: Option<&EmbedderSpec>,
    settings: &EmbedderSettings,
) -> Result<Arc<dyn Embedder>> {
    let spec = match spec {
        Some(spec) => spec.clone().pinned()?,
        None => EmbedderSpec::from_id(&index.manifest.embedder.id)?.default_graph_embedder(),
    };
    load_embedder(&spec, settings)
}

/// What [`build_graph`] built and attached.
#[derive(Debug, Clone)]
pub struct GraphBuilt {
    /// Where the triples came from, as the graph records it.
    pub source: String,
    /// The embedder of the entity and fact vectors.
    pub embedder: String,
    /// What the extraction or the import skipped, and why.
    pub extraction: ExtractReport,
    pub stats: GraphStats,
    /// Where the build's time went (the walk's solve is in `attached`).
    pub times: GraphBuildTimes,
    pub attached: GraphAttached,
}

/// Builds the entity graph of `index`'s passages (the live generation of `store`) from
/// `extraction`, embeds its entities and facts with `embedder`, and attaches it to a new
/// generation recorded as built from `source`.
///
/// Where the index has a graph already, embedded by the same embedder (a graph built
/// again with another extractor, other triples or another synonym threshold), the
/// vectors of the labels and fact texts it has too are taken from it, not embedded
/// again: a vector is a function of its text, so the graph is the one a build from
/// nothing gives, to the bit, as after an edit ([`EntityGraph::build_after`]).
pub fn build_graph(
    store: &dyn Store,
    index: &Index,
    (extraction, source): (Extraction, String),
    embedder: &dyn Embedder,
    options: &GraphOptions,
    progress: &dyn Progress,
) -> Result<GraphBuilt> {
    // Contextual facts are read from the passage's own words between a triple's ends:
    // the heuristic extractor's triples are those words; an OpenIE file's or an LLM's
    // paraphrase them, and are embedded alone, as before contextual facts (read in
    // context on musique-train's GPT-3.5 triples: ppr 71.4 to 72.4 R@5, phasegraph 69.3
    // to 68.0, naive_ge 61.1 to 59.2; one small set, so not made the default there).
    let options = &match options.fact_vectors {
        FactVectors::Contextual if source != "heuristic" => {
            GraphOptions { fact_vectors: FactVectors::Embedded, ..*options }
        }
        _ => *options,
    };
    let mut report = extraction.report.clone();
    let info = index.manifest.graph_embedder();
    let before = match &index.manifest.graph {
        Some(_) if info.id == embedder.id() && info.dim == embedder.dim() => store.load_graph(index, Some(embedder))?,
        _ => None,
    };
    // Built again over the same passages: each is its own passage of the graph before.
    let same: Vec<Option<PassageIdx>> = (0..index.len() as PassageIdx).map(Some).collect();
    let previous = before.as_ref().map(|graph| Previous { graph, passages: &same });
    let (graph, times) =
        EntityGraph::build_after_timed(index.passages().as_slice(), extraction, embedder, options, previous, progress)?;
    drop(before);
    // The extractor's count, and the triples the build found no two entities for.
    report.degenerate_triples += graph.triple_entities.iter().filter(|ends| ends.is_none()).count();
    let attached = attach_graph(store, &graph, source.clone())?;
    Ok(GraphBuilt {
        source,
        embedder: embedder.id().to_string(),
        extraction: report,
        stats: graph.stats,
        times,
        attached,
    })
}
