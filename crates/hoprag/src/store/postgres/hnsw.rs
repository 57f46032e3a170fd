//! Approximate dense search through pgvector's HNSW index on a build's passages.

use postgres::types::ToSql;

use super::{checkout, db_err, passages_table, Pool};
use crate::corpus::PassageIdx;
use crate::error::{Error, Result};
use crate::index::{VectorIndex, VectorIndexKind};

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
