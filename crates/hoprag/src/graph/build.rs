//! Building, storing and loading the entity graph.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{normalize_entity, Edge, EdgeKind, EntityGraph, Extraction};
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::index::{embed_passages, ExactIndex, HnswIndex, Matrix, VectorIndex, VectorIndexKind};
use crate::progress::Progress;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(default)]
pub struct GraphOptions {
    /// Entities whose embeddings have at least this cosine are linked as synonyms
    /// (PhaseGraph §7.2 and HippoRAG 2 use 0.85).
    pub synonym_threshold: f32,
    /// Nearest neighbours examined per entity for synonym links.
    pub synonym_neighbours: usize,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions { synonym_threshold: 0.85, synonym_neighbours: 10 }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GraphStats {
    pub triples: usize,
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

const GRAPH: &str = "graph.json";
const ENTITY_VECTORS: &str = "entities.f32";
const TRIPLE_VECTORS: &str = "triples.f32";

impl EntityGraph {
    /// Builds the graph of `passages` passages from an extraction, embedding entity
    /// labels (for synonym links and query linking) and triple texts (for fact retrieval).
    pub fn build(
        passages: usize,
        mut extraction: Extraction,
        embedder: &dyn Embedder,
        options: &GraphOptions,
        progress: &dyn Progress,
    ) -> Result<EntityGraph> {
        let started = Instant::now();
        let mut index: HashMap<String, u32> = HashMap::new();
        let mut entities = Vec::new();
        let mut labels = Vec::new();
        let mut id_of = |surface: &str| -> Option<u32> {
            let key = normalize_entity(surface);
            if key.is_empty() {
                return None;
            }
            Some(*index.entry(key.clone()).or_insert_with(|| {
                entities.push(key);
                labels.push(surface.trim().to_string());
                (entities.len() - 1) as u32
            }))
        };

        let mut passage_entities: Vec<Vec<u32>> = vec![Vec::new(); passages];
        let mut relation: HashMap<(u32, u32), f32> = HashMap::new();
        let mut triple_entities = Vec::with_capacity(extraction.triples.len());
        for t in &extraction.triples {
            let ends = (id_of(&t.subject), id_of(&t.object));
            let pair = match ends {
                (Some(s), Some(o)) if s != o => Some((s, o)),
                _ => {
                    extraction.report.degenerate_triples += 1;
                    None
                }
            };
            for e in [ends.0, ends.1].into_iter().flatten() {
                passage_entities[t.passage as usize].push(e);
            }
            if let Some((s, o)) = pair {
                *relation.entry((s.min(o), s.max(o))).or_default() += 1.0;
            }
            triple_entities.push(pair);
        }
        for (p, mentions) in extraction.entities.iter().enumerate() {
            for m in mentions {
                if let Some(e) = id_of(m) {
                    passage_entities[p].push(e);
                }
            }
        }
        for list in &mut passage_entities {
            list.sort_unstable();
            list.dedup();
        }

        let t = Instant::now();
        let dim = embedder.dim();
        let entity_vectors =
            Arc::new(Matrix::from_flat(dim, embed_passages(embedder, &labels, 256, "embedding entities", progress)?));
        let texts: Vec<String> = extraction.triples.iter().map(|t| t.text()).collect();
        let triple_vectors =
            Arc::new(Matrix::from_flat(dim, embed_passages(embedder, &texts, 256, "embedding triples", progress)?));
        let embed_secs = t.elapsed().as_secs_f64();

        progress.start("synonym links", 0);
        let synonyms = synonym_edges(&entity_vectors, options)?;
        progress.finish();

        let mut edges: Vec<Edge> =
            relation.into_iter().map(|((a, b), weight)| Edge { a, b, weight, kind: EdgeKind::Relation }).collect();
        edges.sort_by_key(|e| (e.a, e.b));
        let relation_edges = edges.len();
        let synonym_count = synonyms.len();
        edges.extend(synonyms);

        let stats = GraphStats {
            triples: extraction.triples.len(),
            entities: entities.len(),
            passages,
            relation_edges,
            synonym_edges: synonym_count,
            passage_entity_edges: passage_entities.iter().map(Vec::len).sum(),
            components: components(entities.len(), &passage_entities, &edges),
            isolated_passages: passage_entities.iter().filter(|l| l.is_empty()).count(),
            build_secs: started.elapsed().as_secs_f64(),
            embed_secs,
        };
        let mut g = EntityGraph {
            entities,
            labels,
            passage_entities,
            edges,
            triples: extraction.triples,
            triple_entities,
            stats,
            entity_vectors,
            triple_vectors,
            entity_index: HashMap::new(),
        };
        g.reindex();
        Ok(g)
    }

    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(GRAPH);
        let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        serde_json::to_writer(std::io::BufWriter::new(file), self).map_err(|e| Error::input(&path, e.to_string()))?;
        for (name, m) in [(ENTITY_VECTORS, &self.entity_vectors), (TRIPLE_VECTORS, &self.triple_vectors)] {
            let p = dir.join(name);
            std::fs::write(&p, m.to_le_bytes()).map_err(|e| Error::io(&p, e))?;
        }
        Ok(())
    }

    pub fn load(dir: &Path, dim: usize) -> Result<EntityGraph> {
        let path = dir.join(GRAPH);
        let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        let mut g: EntityGraph = serde_json::from_reader(std::io::BufReader::new(file))
            .map_err(|e| Error::input(&path, format!("invalid graph: {e}")))?;
        let read = |name: &str, rows: usize| -> Result<Matrix> {
            let p = dir.join(name);
            let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
            Matrix::from_le_bytes(dim, &bytes)
                .filter(|m| m.rows() == rows)
                .ok_or_else(|| Error::input(&p, format!("expected {rows} vectors of dimension {dim}")))
        };
        g.entity_vectors = Arc::new(read(ENTITY_VECTORS, g.entities.len())?);
        g.triple_vectors = Arc::new(read(TRIPLE_VECTORS, g.triples.len())?);
        g.reindex();
        Ok(g)
    }
}

/// Links each entity to its nearest neighbours at or above the threshold, searching
/// through a vector index (exact below the HNSW threshold), never all pairs.
fn synonym_edges(vectors: &Arc<Matrix>, options: &GraphOptions) -> Result<Vec<Edge>> {
    if vectors.rows() < 2 {
        return Ok(Vec::new());
    }
    let index: Box<dyn VectorIndex> = match VectorIndexKind::Auto.resolve(vectors.rows()) {
        VectorIndexKind::Hnsw => Box::new(HnswIndex::build(vectors, Default::default())?),
        _ => Box::new(ExactIndex::new(vectors.clone())),
    };
    let k = options.synonym_neighbours + 1; // the entity itself comes back first
    let found: Result<Vec<Vec<Edge>>> = (0..vectors.rows() as u32)
        .into_par_iter()
        .map(|a| {
            let hits = index.search(vectors.row(a), k)?;
            Ok(hits
                .into_iter()
                .filter(|&(b, s)| b > a && s >= options.synonym_threshold)
                .map(|(b, s)| Edge { a, b, weight: s, kind: EdgeKind::Synonym })
                .collect())
        })
        .collect();
    let mut edges: Vec<Edge> = found?.into_iter().flatten().collect();
    edges.sort_by_key(|e| (e.a, e.b));
    Ok(edges)
}

/// Connected components of the graph over entity and passage nodes (union-find).
fn components(entities: usize, passage_entities: &[Vec<u32>], edges: &[Edge]) -> usize {
    let n = entities + passage_entities.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut union = |a: usize, b: usize| {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra != rb {
            parent[ra] = rb;
        }
    };
    for e in edges {
        union(e.a as usize, e.b as usize);
    }
    for (p, ents) in passage_entities.iter().enumerate() {
        for &e in ents {
            union(entities + p, e as usize);
        }
    }
    (0..n).filter(|&x| find(&mut parent, x) == x).count()
}
