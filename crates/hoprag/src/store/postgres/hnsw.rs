//! Approximate dense search: the usearch HNSW graph the folder store builds, kept in
//! `hnsw_graphs` (schema version 5) and loaded by every process that opens the
//! generation, with its slot → row table in `hnsw_slots` (schema version 7) once an edit
//! updated it; generations written before version 5 are served by pgvector's HNSW index
//! ([`PgHnsw`]).

use postgres::types::ToSql;
use postgres::GenericClient;
use serde::{Deserialize, Serialize};

use super::{checkout, db_err, parts, passages_table, Pool};
use crate::corpus::PassageIdx;
use crate::error::{Error, Result};
use crate::index::{HnswIndex, HnswParams, Slots, VectorIndex, VectorIndexKind};

/// What a generation row records of its HNSW graph: the `hnsw_graphs` rows of its build
/// keyed by `passages`, and their size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredHnsw {
    pub passages: usize,
    pub bytes: u64,
    /// The size of its slot table in `hnsw_slots`, under the same key; absent where slot
    /// = row (a graph built from scratch, or stored before version 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u64>,
}

/// Stores `graph`, the HNSW graph of the first `passages` passages of `build`, and its
/// slot table where it has one.
pub(crate) fn write(
    client: &mut impl GenericClient,
    build: i64,
    passages: usize,
    graph: &HnswIndex,
    location: &str,
) -> Result<StoredHnsw> {
    if graph.len() != passages {
        return Err(Error::index(
            location,
            format!("the HNSW graph holds {} vectors for {passages} passages", graph.len()),
        ));
    }
    let bytes = graph.to_bytes()?;
    let key: [&(dyn ToSql + Sync); 2] = [&build, &(passages as i32)];
    let mut w = parts::HNSW.writer(client, location)?;
    w.put(&key, &bytes)?;
    w.finish()?;
    let slots = match graph.slots_bytes() {
        Some(table) => {
            let mut w = parts::SLOTS.writer(client, location)?;
            w.put(&key, &table)?;
            w.finish()?;
            Some(table.len() as u64)
        }
        None => None,
    };
    Ok(StoredHnsw { passages, bytes: bytes.len() as u64, slots })
}

/// Generation `generation`'s HNSW graph, in memory.
pub(crate) fn open(
    client: &mut impl GenericClient,
    generation: i64,
    build: i64,
    stored: &StoredHnsw,
    dim: usize,
    params: HnswParams,
    location: &str,
) -> Result<HnswIndex> {
    let what = format!("the HNSW graph of generation {generation} (build {build}, {} passages)", stored.passages);
    let key: [&(dyn ToSql + Sync); 2] = [&build, &(stored.passages as i32)];
    let bytes = parts::HNSW.read_required(client, &key, &what, Some(stored.bytes), location)?;
    let graph =
        HnswIndex::from_bytes(&bytes, dim, params).map_err(|m| Error::index(location, format!("{what}: {m}")))?;
    if graph.len() != stored.passages {
        return Err(Error::index(location, format!("{what} holds {} vectors", graph.len())));
    }
    let Some(size) = stored.slots else { return Ok(graph) };
    let what = format!("the HNSW slot table of generation {generation} (build {build}, {} passages)", stored.passages);
    let bytes = parts::SLOTS.read_required(client, &key, &what, Some(size), location)?;
    Slots::from_bytes(&bytes, stored.passages)
        .and_then(|slots| graph.with_slots(slots))
        .map_err(|m| Error::index(location, format!("{what} in table hnsw_slots: {m}")))
}

/// pgvector's largest hnsw.ef_search.
const MAX_EF_SEARCH: usize = 1000;

/// pgvector's HNSW index (cosine) over one generation's passages: `ORDER BY embedding
/// <=> q LIMIT k` with idx < n, the score being 1 − cosine distance. ef_search is the
/// manifest's, raised to k (pgvector returns at most ef_search rows); past pgvector's
/// limit of 1000 the search runs exactly (index scans off).
pub struct PgHnsw {
    pool: Pool,
    location: String,
    sql: String,
    exact_sql: String,
    passages: usize,
    ef_search: usize,
}

impl PgHnsw {
    pub(crate) fn new(pool: Pool, location: &str, build: i64, passages: usize, ef_search: usize) -> PgHnsw {
        let select =
            format!("SELECT idx, (1 - (embedding <=> $1))::float4 FROM {} WHERE idx < $2", passages_table(build));
        // The index orders by distance alone; the exact scan also breaks ties by index,
        // as the in-process exact search does.
        let sql = format!("{select} ORDER BY embedding <=> $1 LIMIT $3");
        let exact_sql = format!("{select} ORDER BY embedding <=> $1, idx LIMIT $3");
        PgHnsw { pool, location: location.to_string(), sql, exact_sql, passages, ef_search }
    }
}

impl VectorIndex for PgHnsw {
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        self.search_with_breadth(query, k, self.ef_search)
    }

    fn search_with_breadth(&self, query: &[f32], k: usize, breadth: usize) -> Result<Vec<(PassageIdx, f32)>> {
        if k == 0 || self.passages == 0 {
            return Ok(Vec::new());
        }
        let err = db_err(&self.location, "HNSW search");
        let mut conn = checkout(&self.pool, &self.location)?;
        let mut tx = conn.transaction().map_err(&err)?;
        let (setting, sql) = if k > MAX_EF_SEARCH {
            ("SET LOCAL enable_indexscan = off".to_string(), &self.exact_sql)
        } else {
            (format!("SET LOCAL hnsw.ef_search = {}", breadth.max(k).clamp(1, MAX_EF_SEARCH)), &self.sql)
        };
        tx.batch_execute(&setting).map_err(&err)?;
        let v = pgvector::Vector::from(query.to_vec());
        let (n, limit) = (self.passages as i32, k.min(i64::MAX as usize) as i64);
        let params: [&(dyn ToSql + Sync); 3] = [&v, &n, &limit];
        let rows = tx.query(sql.as_str(), &params).map_err(&err)?;
        tx.commit().map_err(&err)?;
        rows.iter()
            .map(|r| {
                let p: i32 = r.get(0);
                if p < 0 {
                    return Err(Error::index(&self.location, format!("row with passage index {p}")));
                }
                Ok((p as PassageIdx, r.get::<_, f32>(1)))
            })
            .collect()
    }

    fn len(&self) -> usize {
        self.passages
    }

    fn kind(&self) -> VectorIndexKind {
        VectorIndexKind::Hnsw
    }
}
