//! The writer: one transaction from the lock to the flip of `current`.

use std::time::Instant;

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{Json, ToSql, Type};
use postgres::Client;
use rayon::prelude::*;

use super::hnsw::{self, StoredHnsw};
use super::lexical::{self, LexicalFiles};
use super::{current, db_err, passages_table, postings_table, readers, vector_type, Conn, Generation, PgStore};
use crate::corpus::Passage;
use crate::error::{Error, Result};
use crate::index::{analyze, analyzer, HnswIndex, Manifest, Matrix, VectorIndexKind};
use crate::progress::Progress;
use crate::store::{Change, StoreWriter, WriteTimes};

/// Passages per COPY statement: the unit of progress, and of memory for the analysed
/// texts.
const BATCH: usize = 8192;

/// A 64-bit FNV-1a hash: advisory-lock keys from names.
pub(crate) fn lock_key(name: &str) -> i64 {
    name.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3)) as i64
}

pub(crate) struct PgWriter<'a> {
    store: &'a PgStore,
    /// Inside an open transaction until committed; rolled back on drop otherwise.
    conn: Option<Conn>,
    base: Option<Generation>,
}

impl<'a> PgWriter<'a> {
    pub(crate) fn begin(store: &'a PgStore) -> Result<PgWriter<'a>> {
        let mut conn = store.conn()?;
        let err = store.err("taking the writer's lock");
        conn.batch_execute("BEGIN").map_err(&err)?;
        let mut writer = PgWriter { store, conn: Some(conn), base: None };
        let conn = writer.client();
        // Held until COMMIT or ROLLBACK, and released by the server when the process
        // dies: concurrent writers run one after the other.
        conn.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key(&format!("hoprag writer {}", store.schema))])
            .map_err(&err)?;
        // Read under the lock (each statement of a read-committed transaction sees the
        // latest commit): nobody can publish in between.
        writer.base = current(writer.client(), &store.location)?;
        Ok(writer)
    }

    fn client(&mut self) -> &mut Client {
        self.conn.as_mut().expect("the writer's connection is held until commit")
    }
}

impl Drop for PgWriter<'_> {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            // Uncommitted: nothing of it becomes visible. A connection that cannot roll
            // back is broken and the pool discards it.
            if let Err(e) = conn.batch_execute("ROLLBACK") {
                log::warn!("{}: rolling back an unfinished write: {e}", self.store.location);
            }
        }
    }
}

impl StoreWriter for PgWriter<'_> {
    fn base(&self) -> Option<&Manifest> {
        self.base.as_ref().map(|g| &g.manifest)
    }

    fn commit(mut self: Box<Self>, change: Change<'_>, progress: &dyn Progress) -> Result<WriteTimes> {
        let location = self.store.location.clone();
        let schema = self.store.schema.clone();
        let no_index = || super::super::no_index(&location);
        let base = self.base.clone();
        let mut times = WriteTimes::default();
        let client = self.client();
        let err = db_err(&location, "writing the index");
        let vector = vector_type(client, &location)?;
        let whole = matches!(change, Change::Replace { delta: None, .. });
        let (manifest, next) = match change {
            // An edit within the delta limit: a build of its own holding its tantivy files
            // and the delta on the whole generation the base is (or is a delta on). No
            // graph or walk: its readers derive them from the base's.
            Change::Replace { manifest, passages, vectors, delta: Some(delta), staged, .. } => {
                let base = base.as_ref().ok_or_else(no_index)?;
                let full = super::delta::Base::of(base);
                if let Some(info) = &manifest.delta {
                    if info.base_passages != full.passages {
                        return Err(Error::index(
                            &location,
                            format!(
                                "the delta is on {} passages, the whole generation it is written on holds {}",
                                info.base_passages, full.passages
                            ),
                        ));
                    }
                }
                if vectors.rows() != passages.len() {
                    return Err(Error::index(
                        &location,
                        format!("{} vectors for {} passages", vectors.rows(), passages.len()),
                    ));
                }
                let (build, tokens) = timed(&mut times.write_secs, || {
                    let build: i64 = client
                        .query_one(
                            "INSERT INTO builds (dim) VALUES ($1) RETURNING id",
                            &[&(manifest.embedder.dim as i32)],
                        )
                        .map_err(&err)?
                        .get(0);
                    let tokens = super::delta::write(client, build, &full, passages, delta, &vector, &location)?;
                    Ok::<_, Error>((build, tokens))
                })?;
                // The new part staged ahead of the lock, beside the parts the base's
                // collection keeps; the collection built again where there is none.
                let staged = staged.as_ref().map(|s| s.dir.path().join(super::STAGED_LEXICAL));
                let lexical = timed(&mut times.lexical_secs, || match (&staged, &base.lexical) {
                    (Some(dir), Some(before)) => {
                        lexical::write_after(client, build, dir, before, &location).transpose()
                    }
                    _ => None,
                })
                .transpose()?;
                let lexical = match lexical {
                    Some(lexical) => lexical,
                    None => {
                        let texts: Vec<String> = passages.iter().map(Passage::index_text).collect();
                        timed(&mut times.lexical_secs, || lexical::write(client, build, &texts, progress, &location))?
                    }
                };
                let next =
                    Next { build, passages: passages.len(), tokens, graph: None, lexical: Some(lexical), hnsw: None };
                (manifest, next)
            }
            // (Its BM25 is postings in SQL, written per build: nothing to reuse by part.)
            Change::Replace { manifest, passages, vectors, graph, walk, kept, staged: _, delta: None } => {
                let dim = manifest.embedder.dim;
                let build: i64 = timed(&mut times.write_secs, || {
                    let build: i64 = client
                        .query_one("INSERT INTO builds (dim) VALUES ($1) RETURNING id", &[&(dim as i32)])
                        .map_err(&err)?
                        .get(0);
                    client
                        .batch_execute(&format!(
                            "CREATE TABLE {p} (idx int NOT NULL, id text NOT NULL, title text NOT NULL, \
                             text text NOT NULL, tokens int NOT NULL, embedding vector({dim}) NOT NULL, \
                             doc text NULL, meta json NULL);",
                            p = passages_table(build),
                        ))
                        .map_err(&err)?;
                    Ok::<_, Error>(build)
                })?;
                let tokens =
                    copy_rows(client, build, passages.as_slice(), vectors, &vector, &mut times, progress, &location)?;
                let texts: Vec<String> = passages.iter().map(Passage::index_text).collect();
                let lexical =
                    timed(&mut times.lexical_secs, || lexical::write(client, build, &texts, progress, &location))?;
                // The key after the bulk load: built once, sorted, rather than row by row.
                timed(&mut times.write_secs, || {
                    client
                        .batch_execute(&format!("ALTER TABLE {} ADD PRIMARY KEY (idx);", passages_table(build)))
                        .map_err(&err)
                })?;
                // The graph the folder store builds, in this process: pgvector's own
                // index is not built (no query would use it; docs/postgres.md). An edit
                // updates its base's stored graph, as the folder store does.
                let hnsw = match manifest.vector_index {
                    VectorIndexKind::Hnsw => Some(timed(&mut times.vector_secs, || {
                        progress.start("hnsw graph", 0);
                        let r = hnsw_after(client, base.as_ref(), kept, manifest, vectors, &location)
                            .and_then(|h| hnsw::write(client, build, passages.len(), &h, &location));
                        progress.finish();
                        r
                    })?),
                    _ => None,
                };
                let graph = match graph {
                    Some(g) => {
                        Some(timed(&mut times.write_secs, || super::graph::write(client, g, walk, &vector, &location))?)
                    }
                    None => None,
                };
                (manifest, Next { build, passages: passages.len(), tokens, graph, lexical: Some(lexical), hnsw })
            }
            Change::Graph { manifest, graph, walk } => {
                let base = base.as_ref().ok_or_else(no_index)?;
                let id = timed(&mut times.write_secs, || super::graph::write(client, graph, walk, &vector, &location))?;
                let next = Next {
                    build: base.build,
                    passages: base.passages,
                    tokens: base.tokens,
                    graph: Some(id),
                    lexical: base.lexical.clone(),
                    hnsw: base.hnsw,
                };
                (manifest, next)
            }
        };
        if manifest.counts.passages != next.passages {
            return Err(Error::index(
                &location,
                format!("the manifest counts {} passages, the generation {}", manifest.counts.passages, next.passages),
            ));
        }
        timed(&mut times.write_secs, || publish(client, &next, manifest, base.as_ref(), &schema, &location))?;
        let conn = self.conn.take().expect("the writer's connection is held until commit");
        let mut conn = conn;
        timed(&mut times.write_secs, || conn.batch_execute("COMMIT").map_err(db_err(&location, "committing")))?;
        // VACUUM cannot run in the writer's transaction: it sets the visibility map and
        // the planner's statistics now rather than when autovacuum gets there. The
        // generation is live either way, so a failure is only logged.
        // Only a whole build's passages table: a delta generation's build has none, and a
        // graph's generation shares its build's, vacuumed when that was written.
        let vacuum = whole.then(|| format!("VACUUM (ANALYZE) {}", passages_table(next.build)));
        timed(&mut times.write_secs, || {
            if let Some(vacuum) = &vacuum {
                if let Err(e) = conn.batch_execute(vacuum) {
                    log::warn!("{location}: {vacuum}: {e}");
                }
            }
        });
        Ok(times)
    }
}

/// The HNSW graph of `vectors`: an edit's (`kept`) is its base's stored graph updated
/// ([`HnswIndex::after_edit`]), read into memory; a build's, or an edit's of a base
/// without a stored graph (pgvector's, before schema version 5), is built.
fn hnsw_after(
    client: &mut Client,
    base: Option<&Generation>,
    kept: Option<&[Option<crate::corpus::PassageIdx>]>,
    manifest: &Manifest,
    vectors: &Matrix,
    location: &str,
) -> Result<HnswIndex> {
    let (base, kept) = match (base, kept) {
        (Some(b), Some(kept)) if b.manifest.vector_index == VectorIndexKind::Hnsw => (b, kept),
        _ => return HnswIndex::build(vectors, manifest.hnsw),
    };
    // A whole generation written from a delta one (a compaction, or an edit past the
    // delta limit) updates the HNSW graph of the delta's base, `kept` mapped to its rows.
    let (build, stored, kept) = match &base.delta {
        Some(d) => {
            let of_base = super::delta::of_base(client, base, d, location)?;
            let rows: Vec<Option<crate::corpus::PassageIdx>> =
                kept.iter().map(|k| k.and_then(|j| of_base.get(j as usize).copied().flatten())).collect();
            (d.base.build, d.base.hnsw, std::borrow::Cow::Owned(rows))
        }
        None => (base.build, base.hnsw, std::borrow::Cow::Borrowed(kept)),
    };
    let Some(stored) = stored else { return HnswIndex::build(vectors, manifest.hnsw) };
    let t = Instant::now();
    let old = hnsw::open(client, base.id, build, &stored, manifest.embedder.dim, manifest.hnsw, location)?;
    let (graph, update) = old.after_edit(vectors, &kept)?;
    log::info!(
        "{location}: hnsw {} in {:.2}s ({} removed, {} inserted)",
        if update.rebuilt { "rebuilt" } else { "updated" },
        t.elapsed().as_secs_f64(),
        update.removed,
        update.inserted
    );
    Ok(graph)
}

/// The new generation's row.
struct Next {
    build: i64,
    passages: usize,
    tokens: i64,
    graph: Option<i64>,
    lexical: Option<LexicalFiles>,
    hnsw: Option<StoredHnsw>,
}

/// Records the generation, points `current` at it, and drops the generations that
/// neither are it or its base nor are held open by a reader ([`readers`]), with the
/// builds, graphs and HNSW graphs no remaining generation uses. A held generation stays
/// for a later write to drop once its readers are gone.
fn publish(
    client: &mut Client,
    next: &Next,
    manifest: &Manifest,
    base: Option<&Generation>,
    schema: &str,
    location: &str,
) -> Result<()> {
    let err = db_err(location, "publishing the generation");
    let json = serde_json::to_string(manifest).map_err(|e| Error::Other(e.to_string()))?;
    let lexical =
        next.lexical.as_ref().map(serde_json::to_string).transpose().map_err(|e| Error::Other(e.to_string()))?;
    let hnsw = next.hnsw.as_ref().map(serde_json::to_string).transpose().map_err(|e| Error::Other(e.to_string()))?;
    let id: i64 = client
        .query_one(
            "INSERT INTO generations (build, passages, tokens, graph, manifest, lexical, hnsw) \
             VALUES ($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb, $7::text::jsonb) RETURNING id",
            &[&next.build, &(next.passages as i32), &next.tokens, &next.graph, &json, &lexical, &hnsw],
        )
        .map_err(&err)?
        .get(0);
    client
        .execute(
            "INSERT INTO current (singleton, generation) VALUES (true, $1) \
             ON CONFLICT (singleton) DO UPDATE SET generation = excluded.generation",
            &[&id],
        )
        .map_err(&err)?;
    // The base stays whatever its readers do: a process may have read `current` and be
    // about to hold it.
    let keep: Vec<i64> = [Some(id), base.map(|b| b.id)].into_iter().flatten().collect();
    let older: Vec<i64> = client
        .query("SELECT id FROM generations WHERE id <> ALL($1) ORDER BY id", &[&keep])
        .map_err(&err)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    // Exclusively, until this transaction ends: a reader's try of the shared lock
    // fails meanwhile and it reads the (then newer) live generation instead.
    let keys: Vec<i64> = older.iter().map(|&g| readers::key(schema, g)).collect();
    let unheld: Vec<i64> = client
        .query(
            "SELECT g FROM unnest($1::bigint[], $2::bigint[]) AS o(g, k) WHERE pg_try_advisory_xact_lock(k) ORDER BY g",
            &[&older, &keys],
        )
        .map_err(&err)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if unheld.len() < older.len() {
        let held: Vec<&i64> = older.iter().filter(|g| !unheld.contains(g)).collect();
        log::debug!("{location}: kept generations {held:?}: readers hold them");
    }
    client.execute("DELETE FROM generations WHERE id = ANY($1)", &[&unheld]).map_err(&err)?;
    // A build stays while a generation is of it, a kept build's delta is on it, or a
    // generation lists one of its lexical parts: the builds none of these hold go first
    // (with their deltas, ON DELETE CASCADE), then the whole builds only those deltas
    // were on. (In one statement, the check of a base's key could run before the cascade
    // removes the delta that names it.)
    let mut stale: Vec<i64> = Vec::new();
    loop {
        let dropped: Vec<i64> = client
            .query(
                "DELETE FROM builds b WHERE NOT EXISTS (SELECT 1 FROM generations g WHERE g.build = b.id) \
                 AND NOT EXISTS (SELECT 1 FROM deltas d WHERE d.base_build = b.id) \
                 AND NOT EXISTS (SELECT 1 FROM generations g, \
                     jsonb_array_elements(coalesce(g.lexical->'parted'->'parts', '[]'::jsonb)) p \
                     WHERE (p->>'build')::bigint = b.id) RETURNING id",
                &[],
            )
            .map_err(&err)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if dropped.is_empty() {
            break;
        }
        stale.extend(dropped);
    }
    for b in stale {
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS {}, {}", passages_table(b), postings_table(b)))
            .map_err(&err)?;
    }
    // Files and deltas of dropped builds went with them (ON DELETE CASCADE); graphs are
    // shared by the generations of one build, and a build's HNSW graphs are per passage
    // count (builds of schema versions before 6 grew by appends). A kept delta keeps
    // its base's graph and HNSW graph.
    client
        .batch_execute(
            "DELETE FROM graphs x WHERE NOT EXISTS (SELECT 1 FROM generations g WHERE g.graph = x.id) \
                 AND NOT EXISTS (SELECT 1 FROM deltas d WHERE d.base_graph = x.id);
             DELETE FROM hnsw_graphs h WHERE NOT EXISTS (SELECT 1 FROM generations g \
                 WHERE g.build = h.build AND (g.hnsw->>'passages')::int = h.passages) \
                 AND NOT EXISTS (SELECT 1 FROM deltas d \
                 WHERE d.base_build = h.build AND (d.base_hnsw->>'passages')::int = h.passages);
             DELETE FROM hnsw_slots h WHERE NOT EXISTS (SELECT 1 FROM generations g \
                 WHERE g.build = h.build AND (g.hnsw->>'passages')::int = h.passages) \
                 AND NOT EXISTS (SELECT 1 FROM deltas d \
                 WHERE d.base_build = h.build AND (d.base_hnsw->>'passages')::int = h.passages);",
        )
        .map_err(&err)?;
    Ok(())
}

/// Writes the passages of `build` with binary COPY, batch by batch, each with its length
/// in analysed tokens; returns their sum.
#[allow(clippy::too_many_arguments)]
fn copy_rows(
    client: &mut Client,
    build: i64,
    passages: &[Passage],
    vectors: &Matrix,
    vector: &Type,
    times: &mut WriteTimes,
    progress: &dyn Progress,
    location: &str,
) -> Result<i64> {
    if vectors.rows() != passages.len() {
        return Err(Error::index(location, format!("{} vectors for {} passages", vectors.rows(), passages.len())));
    }
    let err = db_err(location, "copying rows");
    let passage_types =
        [Type::INT4, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT4, vector.clone(), Type::TEXT, Type::JSON];
    let copy_passages = format!(
        "COPY {} (idx, id, title, text, tokens, embedding, doc, meta) FROM STDIN (FORMAT binary)",
        passages_table(build)
    );
    let analyser = analyzer()?;
    let mut tokens = 0i64;
    progress.start("passages", passages.len() as u64);
    for (b, chunk) in passages.chunks(BATCH).enumerate() {
        let start = b * BATCH;
        // Each passage's length, analysed as tantivy does.
        let lengths: Vec<u32> = timed(&mut times.lexical_secs, || {
            chunk.par_iter().map_init(|| analyser.clone(), |a, p| analyze(a, &p.index_text()).len() as u32).collect()
        });
        timed(&mut times.write_secs, || {
            let mut w = BinaryCopyInWriter::new(client.copy_in(copy_passages.as_str()).map_err(&err)?, &passage_types);
            for (i, p) in chunk.iter().enumerate() {
                let idx = (start + i) as i32;
                let len = lengths[i] as i32;
                let v = pgvector::Vector::from(vectors.row((start + i) as u32).to_vec());
                let meta = p.meta.as_ref().map(Json);
                let row: [&(dyn ToSql + Sync); 8] = [&idx, &p.id, &p.title, &p.text, &len, &v, &p.doc, &meta];
                w.write(&row).map_err(&err)?;
            }
            w.finish().map_err(&err)
        })?;
        tokens += lengths.iter().map(|&len| len as i64).sum::<i64>();
        progress.advance(chunk.len() as u64);
    }
    progress.finish();
    Ok(tokens)
}

fn timed<T>(acc: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    *acc += t.elapsed().as_secs_f64();
    r
}
