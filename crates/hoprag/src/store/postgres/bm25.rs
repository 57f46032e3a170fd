//! BM25 in SQL over a build's postings, scored as tantivy scores so that both stores
//! rank alike.

use postgres::types::ToSql;

use super::{checkout, db_err, postings_table, Pool};
use crate::corpus::PassageIdx;
use crate::error::{Error, Result};
use crate::index::{analyze, analyzer, LexicalIndex};

/// BM25 of one generation: the postings of its build with passage < n.
///
/// tantivy 0.25's formula (src/query/bm25.rs), k1 = 1.2, b = 0.75:
/// idf = ln(1 + (N − df + 0.5) / (df + 0.5)) and per term
/// idf · (k1 + 1) · tf / (tf + k1 · (1 − b + b · dl / avgdl)), summed over the query's
/// distinct analysed terms. N is the number of passages; dl is the document's length
/// in analysed tokens (stop words removed, as tantivy counts them) quantised to its
/// one-byte field norm; avgdl is the exact token total over N. The writer stores dl on
/// every posting row, so a query reads the postings of its terms and nothing else.
/// Ties go to the lower passage index.
pub struct SqlBm25 {
    pool: Pool,
    location: String,
    sql: String,
    passages: usize,
    avgdl: f64,
    analyzer: tantivy::tokenizer::TextAnalyzer,
}

impl SqlBm25 {
    pub(crate) fn new(pool: Pool, location: &str, build: i64, passages: usize, tokens: i64) -> Result<SqlBm25> {
        // The matching postings once; document frequencies and the per-passage sums by
        // hashing (no sort but the final top k).
        let sql = format!(
            "WITH hits AS MATERIALIZED ( \
                 SELECT term, passage, tf, dl FROM {} WHERE term = ANY($1) AND passage < $2), \
             df AS (SELECT term, count(*)::float8 AS df FROM hits GROUP BY term), \
             scored AS ( \
                 SELECT passage, sum(ln(1 + ($2::float8 - df + 0.5) / (df + 0.5)) * 2.2 * tf \
                     / (tf + 1.2 * (0.25 + 0.75 * dl / $3::float8))) AS score \
                 FROM hits JOIN df USING (term) GROUP BY passage) \
             SELECT passage, score::float4 FROM scored ORDER BY score DESC, passage LIMIT $4",
            postings_table(build)
        );
        let avgdl = if passages == 0 { 1.0 } else { (tokens as f64 / passages as f64).max(f64::MIN_POSITIVE) };
        let analyzer = analyzer()?;
        Ok(SqlBm25 { pool, location: location.to_string(), sql, passages, avgdl, analyzer })
    }
}

impl LexicalIndex for SqlBm25 {
    fn search(&self, query: &str, k: usize) -> Result<Vec<(PassageIdx, f32)>> {
        let mut terms = analyze(&mut self.analyzer.clone(), query);
        // Each distinct term once, as tantivy's query does.
        let mut seen = std::collections::HashSet::new();
        terms.retain(|t| seen.insert(t.clone()));
        if terms.is_empty() || k == 0 || self.passages == 0 {
            return Ok(Vec::new());
        }
        let mut conn = checkout(&self.pool, &self.location)?;
        let (n, limit) = (self.passages as i32, k.min(i64::MAX as usize) as i64);
        let params: [&(dyn ToSql + Sync); 4] = [&terms, &n, &self.avgdl, &limit];
        let rows = conn.query(self.sql.as_str(), &params).map_err(db_err(&self.location, "BM25 search"))?;
        rows.iter()
            .map(|r| {
                let p: i32 = r.get(0);
                let s: f32 = r.get(1);
                if p < 0 {
                    return Err(Error::index(&self.location, format!("postings name passage {p}")));
                }
                Ok((p as PassageIdx, s))
            })
            .collect()
    }

    fn len(&self) -> usize {
        self.passages
    }
}
