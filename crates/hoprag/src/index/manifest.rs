//! The index manifest: what was built, from what, with which embedder.

use serde::{Deserialize, Serialize};

use super::vector::{HnswParams, VectorIndexKind};

/// Bumped whenever the on-disk layout changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub hoprag_version: String,
    pub embedder: EmbedderInfo,
    /// SHA-256 over every passage's id, title and text, in index order.
    pub corpus_checksum: String,
    pub counts: Counts,
    pub vector_index: VectorIndexKind,
    pub hnsw: HnswParams,
    /// Corpus files or folders the passages came from, in the order they were added.
    pub sources: Vec<String>,
    /// The entity graph, when one has been attached.
    #[serde(default)]
    pub graph: Option<GraphInfo>,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
    pub updated_at: u64,
    /// Where the generation is a delta on a full one ([`crate::store::delta`]): how big.
    /// The graph's statistics are then its base's until the delta is compacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaInfo>,
}

/// The size of a delta generation ([`crate::store::delta::Delta`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaInfo {
    /// Passages of the full generation it is a delta on.
    pub base_passages: usize,
    /// The base's passages it no longer holds, and those it holds that the base does not.
    pub removed: usize,
    pub added: usize,
}

impl Manifest {
    /// The embedder of the graph's entity and fact vectors: the graph's own, or the index's.
    pub fn graph_embedder(&self) -> &EmbedderInfo {
        self.graph.as_ref().and_then(|g| g.embedder.as_ref()).unwrap_or(&self.embedder)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedderInfo {
    pub id: String,
    pub dim: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counts {
    pub passages: usize,
    /// Entries skipped or dropped as duplicates over all builds and additions.
    pub skipped: usize,
    pub duplicates: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphInfo {
    /// Where the triples came from: an OpenIE file, `heuristic`, or `llm:MODEL`.
    pub source: String,
    /// Passages the graph covers; passages added later have no entities until the graph
    /// is rebuilt.
    pub passages: usize,
    pub stats: GraphStats,
    /// The embedder of the graph's entity and fact vectors where it is not the index's
    /// (`--graph-embedder`): questions are then embedded by both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder: Option<EmbedderInfo>,
}

/// What a graph build produced (recorded in the manifest, shown by `hoprag graph`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GraphStats {
    pub triples: usize,
    /// Distinct triple texts, each embedded once (0 in graphs built before facts were
    /// shared).
    #[serde(default)]
    pub facts: usize,
    pub entities: usize,
    pub passages: usize,
    pub relation_edges: usize,
    pub synonym_edges: usize,
    pub passage_entity_edges: usize,
    /// Connected components over entity and passage nodes together.
    pub components: usize,
    /// Passages linked to no entity.
    pub isolated_passages: usize,
    pub build_secs: f64,
    pub embed_secs: f64,
}

/// The texts one embedding phase of a build embedded, and its seconds (tokenising and
/// gathering the vectors included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedWork {
    /// Texts run through the embedder.
    pub texts: usize,
    /// Vectors taken instead from the graph an edit started from (the same text, so the
    /// same vector).
    pub reused: usize,
    pub secs: f64,
}

impl EmbedWork {
    /// Texts embedded per second (0 when nothing was).
    pub fn texts_per_sec(&self) -> f64 {
        if self.texts > 0 && self.secs > 0.0 {
            self.texts as f64 / self.secs
        } else {
            0.0
        }
    }
}

/// Where the time of one graph build went, for its report. Not stored with the graph:
/// an edit's build embeds only the texts it brings, so its figures describe the build,
/// not the graph ([`GraphStats`] is the same however the graph was reached).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphBuildTimes {
    /// The entities' labels.
    pub entities: EmbedWork,
    /// The facts' texts ("subject predicate object"), one per distinct text.
    pub facts: EmbedWork,
    /// Linking entities whose vectors are close: what that search added after the facts'
    /// vectors were made (it runs beside them).
    pub synonym_secs: f64,
}
