//! The schema's migrations: SQL files versioned in the repository
//! (`crates/hoprag/migrations/postgres/NNNN_name.sql`), applied in order, each once,
//! inside one transaction under an advisory lock (two processes starting on a fresh
//! database do not both create the schema), and recorded in `hoprag_migrations`.

use postgres::Client;

use super::{db_err, describe};
use crate::error::{Error, Result};

/// (version, name, SQL), in order.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "init", include_str!("../../../migrations/postgres/0001_init.sql")),
    (2, "facts", include_str!("../../../migrations/postgres/0002_facts.sql")),
    (3, "lexical_files", include_str!("../../../migrations/postgres/0003_lexical_files.sql")),
    (4, "graph_walks", include_str!("../../../migrations/postgres/0004_graph_walks.sql")),
    (5, "hnsw_graphs", include_str!("../../../migrations/postgres/0005_hnsw_graphs.sql")),
    (6, "living_corpus", include_str!("../../../migrations/postgres/0006_living_corpus.sql")),
    (7, "hnsw_slots", include_str!("../../../migrations/postgres/0007_hnsw_slots.sql")),
    (8, "deltas", include_str!("../../../migrations/postgres/0008_deltas.sql")),
];

/// The newest schema version this hoprag knows.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Advisory-lock key of the migrations of `schema` (not the writers' key: a server
/// starting while a build runs must not wait for the build).
fn lock_key(schema: &str) -> i64 {
    super::writer::lock_key(&format!("hoprag migrations {schema}"))
}

/// Brings `schema` to the newest version, or fails if it was made by a newer hoprag.
pub(crate) fn run(client: &mut Client, schema: &str, vector_schema: &str, location: &str) -> Result<()> {
    let err = db_err(location, "migrating the schema");
    let applied = applied(client, schema, location)?;
    if applied == Some(latest()) {
        return Ok(());
    }
    check_known(applied, schema, location)?;
    let mut tx = client.transaction().map_err(&err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key(schema)]).map_err(&err)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.hoprag_migrations (
             version int PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now());
         SET LOCAL search_path TO {schema}, {vector_schema};"
    ))
    .map_err(&err)?;
    // Again under the lock: another process may have migrated meanwhile.
    let applied: Option<i32> = tx.query_one("SELECT max(version) FROM hoprag_migrations", &[]).map_err(&err)?.get(0);
    check_known(applied, schema, location)?;
    for &(version, name, sql) in MIGRATIONS.iter().filter(|m| Some(m.0) > applied) {
        tx.batch_execute(sql).map_err(|e| {
            Error::index(
                location,
                format!("migration {version:04}_{name}.sql failed in schema {schema}: {}", describe(&e)),
            )
        })?;
        tx.execute("INSERT INTO hoprag_migrations (version, name) VALUES ($1, $2)", &[&version, &name])
            .map_err(&err)?;
        log::info!("{location}: applied migration {version:04}_{name} to schema {schema}");
    }
    tx.commit().map_err(&err)
}

/// The newest version applied to `schema`, `None` when it has no hoprag tables.
fn applied(client: &mut Client, schema: &str, location: &str) -> Result<Option<i32>> {
    let err = db_err(location, "reading the schema version");
    let table = format!("{schema}.hoprag_migrations");
    let exists: bool = client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).map_err(&err)?.get(0);
    if !exists {
        return Ok(None);
    }
    Ok(client.query_one(&format!("SELECT max(version) FROM {table}"), &[]).map_err(&err)?.get(0))
}

fn check_known(applied: Option<i32>, schema: &str, location: &str) -> Result<()> {
    match applied {
        Some(v) if v > latest() => Err(Error::index(location, newer_schema(schema, v))),
        _ => Ok(()),
    }
}

pub(crate) fn newer_schema(schema: &str, version: i32) -> String {
    format!(
        "schema {schema} was written by a newer hoprag (schema version {version}; this hoprag knows up to {}): \
         upgrade hoprag, or use another schema (?schema=NAME)",
        latest()
    )
}
