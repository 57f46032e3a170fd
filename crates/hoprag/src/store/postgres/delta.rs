//! Delta generations on PostgreSQL (schema version 8; [`crate::store::delta`]): an
//! edit's generation written as the net change since the last whole generation, so that
//! it writes rows in proportion to the edit.
//!
//! A delta generation is a build of its own without a passages table: its tantivy files
//! (as every edit writes them), one `deltas` row naming its whole generation (the base:
//! build, passage count, tokens, HNSW graph record, graph) with the base's rows it no
//! longer holds, and the passages it adds with their vectors (`delta_passages`). Reading
//! it reads the base's rows and applies the delta ([`Delta::apply`]); the HNSW graph is
//! the base's, updated in memory as an edit updates it; the entity graph is derived
//! from the base's ([`crate::store::edit::delta_graph`]) unless the generation stores
//! one of its own.

use postgres::binary_copy::{BinaryCopyInWriter, BinaryCopyOutIter};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{Json, ToSql, Type};
use postgres::GenericClient;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::hnsw::StoredHnsw;
use super::{db_err, passages_table, Generation};
use crate::corpus::{Meta, Passage, PassageIdx};
use crate::error::{Error, Result};
use crate::index::{analyze, analyzer, Matrix, Passages};
use crate::store::delta::Delta;

/// A whole generation's rows: what a delta generation is a delta on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Base {
    /// Its build: rows idx < `passages` of `passages_b<build>`.
    pub build: i64,
    pub passages: usize,
    /// Analysed tokens over its passages.
    pub tokens: i64,
    /// Its HNSW graph's rows (of `build`), where it keeps one.
    pub hnsw: Option<StoredHnsw>,
    /// Its entity graph, where it has one.
    pub graph: Option<i64>,
}

impl Base {
    /// The whole generation a delta written on `generation` is a delta on: the
    /// generation itself, or the base of the delta it is.
    pub(crate) fn of(generation: &Generation) -> Base {
        match &generation.delta {
            Some(d) => d.base.clone(),
            None => Base {
                build: generation.build,
                passages: generation.passages,
                tokens: generation.tokens,
                hnsw: generation.hnsw,
                graph: generation.graph,
            },
        }
    }
}

/// What a delta generation's `deltas` row says.
#[derive(Debug, Clone)]
pub(crate) struct StoredDelta {
    pub base: Base,
    /// Rows of the base the generation no longer holds, ascending.
    pub removed: Vec<PassageIdx>,
}

/// The columns of `deltas` [`StoredDelta::from_row`] reads, for a query joining it as `d`.
pub(crate) const COLUMNS: &str =
    "d.build IS NOT NULL, d.base_build, d.base_passages, d.base_tokens, d.base_hnsw::text, d.base_graph, d.removed";

impl StoredDelta {
    /// Reads [`COLUMNS`], starting at column `at` of `row`; `None` where the generation
    /// is whole (no `deltas` row).
    pub(crate) fn from_row(row: &postgres::Row, at: usize, location: &str) -> Result<Option<StoredDelta>> {
        if !row.get::<_, bool>(at) {
            return Ok(None);
        }
        let hnsw: Option<String> = row.get(at + 4);
        let hnsw = hnsw
            .map(|h| serde_json::from_str(&h))
            .transpose()
            .map_err(|e| Error::index(location, format!("a delta's base HNSW record is invalid: {e}")))?;
        let removed: Vec<i32> = row.get(at + 6);
        Ok(Some(StoredDelta {
            base: Base {
                build: row.get(at + 1),
                passages: row.get::<_, i32>(at + 2) as usize,
                tokens: row.get(at + 3),
                hnsw,
                graph: row.get(at + 5),
            },
            removed: removed.into_iter().map(|r| r as PassageIdx).collect(),
        }))
    }
}

/// Writes `delta` (on `base`) as build `build`'s delta: its `deltas` row and its added
/// passages (`passages` is the whole generation, in canonical order, for their rows);
/// returns the generation's analysed tokens.
pub(crate) fn write(
    client: &mut impl GenericClient,
    build: i64,
    base: &Base,
    passages: &Passages,
    delta: &Delta,
    vector: &Type,
    location: &str,
) -> Result<i64> {
    let err = db_err(location, "writing the delta");
    if delta.vectors.rows() != delta.added.len() {
        return Err(Error::index(
            location,
            format!("the delta holds {} vectors for {} passages", delta.vectors.rows(), delta.added.len()),
        ));
    }
    let removed: Vec<i32> = delta.removed.iter().map(|&r| r as i32).collect();
    let hnsw = base.hnsw.as_ref().map(serde_json::to_string).transpose().map_err(|e| Error::Other(e.to_string()))?;
    client
        .execute(
            "INSERT INTO deltas (build, base_build, base_passages, base_tokens, base_hnsw, base_graph, removed) \
             VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7)",
            &[&build, &base.build, &(base.passages as i32), &base.tokens, &hnsw, &base.graph, &removed],
        )
        .map_err(&err)?;
    let removed_tokens: i64 = client
        .query_one(
            &format!(
                "SELECT coalesce(sum(tokens), 0)::bigint FROM {} WHERE idx = ANY($1) AND idx < $2",
                passages_table(base.build)
            ),
            &[&removed, &(base.passages as i32)],
        )
        .map_err(&err)?
        .get(0);
    // Each added passage's row in the generation (canonical order: a binary search).
    let mut rows = Vec::with_capacity(delta.added.len());
    for p in &delta.added {
        let Some(at) = passages.find(&p.id) else {
            return Err(Error::index(location, format!("the delta adds {:?}, which the generation lacks", p.id)));
        };
        rows.push(at as i32);
    }
    let analyser = analyzer()?;
    let lengths: Vec<i32> =
        delta.added.par_iter().map_init(|| analyser.clone(), |a, p| analyze(a, &p.index_text()).len() as i32).collect();
    let types = [
        Type::INT8,
        Type::INT4,
        Type::INT4,
        Type::TEXT,
        Type::TEXT,
        Type::TEXT,
        Type::INT4,
        vector.clone(),
        Type::TEXT,
        Type::JSON,
    ];
    let copy = "COPY delta_passages (build, ord, idx, id, title, text, tokens, embedding, doc, meta) \
                FROM STDIN (FORMAT binary)";
    let mut w = BinaryCopyInWriter::new(client.copy_in(copy).map_err(&err)?, &types);
    for (i, p) in delta.added.iter().enumerate() {
        let ord = i as i32;
        let v = pgvector::Vector::from(delta.vectors.row(i as PassageIdx).to_vec());
        let meta = p.meta.as_ref().map(Json);
        let row: [&(dyn ToSql + Sync); 10] =
            [&build, &ord, &rows[i], &p.id, &p.title, &p.text, &lengths[i], &v, &p.doc, &meta];
        w.write(&row).map_err(&err)?;
    }
    w.finish().map_err(&err)?;
    Ok(base.tokens - removed_tokens + lengths.iter().map(|&n| n as i64).sum::<i64>())
}

/// The passages build `build`'s delta adds, in canonical order, with each one's row in
/// the generation and their vectors.
pub(crate) fn read_added(
    client: &mut impl GenericClient,
    build: i64,
    dim: usize,
    location: &str,
) -> Result<(Vec<Passage>, Vec<PassageIdx>, Matrix)> {
    let vector = super::vector_type(client, location)?;
    let sql = format!(
        "COPY (SELECT ord, idx, id, title, text, embedding, doc, meta FROM delta_passages WHERE build = {build} \
         ORDER BY ord) TO STDOUT (FORMAT binary)"
    );
    let err = db_err(location, "reading the delta's passages");
    let reader = client.copy_out(sql.as_str()).map_err(&err)?;
    let types = [Type::INT4, Type::INT4, Type::TEXT, Type::TEXT, Type::TEXT, vector, Type::TEXT, Type::JSON];
    let mut rows = BinaryCopyOutIter::new(reader, &types);
    let (mut passages, mut at, mut data) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(row) = rows.next().map_err(&err)? {
        let ord: i32 = row.try_get(0).map_err(&err)?;
        if ord as usize != passages.len() {
            return Err(Error::index(location, format!("build {build}: the delta lacks passage {}", passages.len())));
        }
        at.push(row.try_get::<i32>(1).map_err(&err)? as PassageIdx);
        let v: pgvector::Vector = row.try_get(5).map_err(&err)?;
        if v.as_slice().len() != dim {
            return Err(Error::index(
                location,
                format!("build {build}: an added passage's vector has dimension {}, not {dim}", v.as_slice().len()),
            ));
        }
        data.extend_from_slice(v.as_slice());
        passages.push(Passage {
            id: row.try_get(2).map_err(&err)?,
            title: row.try_get(3).map_err(&err)?,
            text: row.try_get(4).map_err(&err)?,
            doc: row.try_get(6).map_err(&err)?,
            meta: row.try_get::<Option<Json<Meta>>>(7).map_err(&err)?.map(|m| m.0),
        });
    }
    Ok((passages, at, Matrix::from_flat(dim.max(1), data)))
}

/// Delta generation `g`'s passages, their vectors, each one's row of the base (`None`:
/// added) and the base's passages.
#[allow(clippy::type_complexity)]
pub(crate) fn read(
    client: &mut impl GenericClient,
    g: &Generation,
    d: &StoredDelta,
    location: &str,
) -> Result<(Passages, Matrix, Vec<Option<PassageIdx>>, Passages)> {
    let dim = g.manifest.embedder.dim;
    let (base_passages, base_vectors) = super::read_rows(
        client,
        d.base.build,
        d.base.passages,
        dim,
        &format!("base of generation {}", g.id),
        location,
    )?;
    let (added, at, vectors) = read_added(client, g.build, dim, location)?;
    let delta = Delta { removed: d.removed.clone(), added, vectors };
    let base_passages = Passages::whole(base_passages);
    let (passages, vectors, of_base) = delta.apply(&base_passages, std::sync::Arc::new(base_vectors), location)?;
    let added_at: Vec<PassageIdx> =
        of_base.iter().enumerate().filter(|(_, r)| r.is_none()).map(|(i, _)| i as PassageIdx).collect();
    if passages.len() != g.passages || added_at != at {
        return Err(Error::index(
            location,
            format!(
                "generation {}: its delta makes {} passages (the generation says {}), its added rows disagree with \
                 the stored ones: {}",
                g.id,
                passages.len(),
                g.passages,
                added_at != at
            ),
        ));
    }
    Ok((passages, vectors, of_base, base_passages))
}

/// Delta generation `g`'s row of the base for each of its passages (`None`: added),
/// from its rows alone: the added passages' rows, and the base's rows not removed in
/// order between them.
pub(crate) fn of_base(
    client: &mut impl GenericClient,
    g: &Generation,
    d: &StoredDelta,
    location: &str,
) -> Result<Vec<Option<PassageIdx>>> {
    let added: Vec<i32> = client
        .query("SELECT idx FROM delta_passages WHERE build = $1 ORDER BY ord", &[&g.build])
        .map_err(db_err(location, "reading the delta's rows"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut removed = d.removed.iter().peekable();
    let mut kept = (0..d.base.passages as PassageIdx).filter(|r| {
        if removed.peek() == Some(&r) {
            removed.next();
            false
        } else {
            true
        }
    });
    let mut added = added.into_iter().peekable();
    let mut out = Vec::with_capacity(g.passages);
    for i in 0..g.passages {
        if added.peek() == Some(&(i as i32)) {
            added.next();
            out.push(None);
        } else {
            let r = kept
                .next()
                .ok_or_else(|| Error::index(location, format!("generation {}: its delta has too few rows", g.id)))?;
            out.push(Some(r));
        }
    }
    if added.next().is_some() || kept.next().is_some() {
        return Err(Error::index(location, format!("generation {}: its delta has rows past its passages", g.id)));
    }
    Ok(out)
}
