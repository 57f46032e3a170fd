//! Namespaces in PostgreSQL: one schema each beside the default schema (the URL's),
//! listed in the default schema's `hoprag_namespaces` table.
//!
//! A namespace's schema is named from a hash of its name (`<default>_ns_<16 hex>`), so
//! that any valid name (`2wiki-dev`, `Acme.EU`) gives a plain lowercase identifier of
//! bounded length: the name itself only ever travels as a query parameter.

use postgres::GenericClient;
use sha2::{Digest, Sha256};

use super::{db_err, is_plain_identifier};
use crate::error::{Error, Result};
use crate::store::Namespace;

/// The schema of `namespace` beside the default schema `base`.
pub(crate) fn schema_of(base: &str, namespace: &Namespace) -> Result<String> {
    if namespace.is_default() {
        return Ok(base.to_string());
    }
    let digest = Sha256::digest(namespace.as_str().as_bytes());
    let schema = format!("{base}_ns_{}", hex::encode(&digest[..8]));
    if !is_plain_identifier(&schema) {
        return Err(Error::Config(format!(
            "schema {base:?} is too long to hold namespaces beside it (at most {} characters)",
            63 - 20
        )));
    }
    Ok(schema)
}

/// Creates the table of namespaces in `base` if missing, and lists `namespace` in it.
pub(crate) fn register(
    client: &mut postgres::Client,
    base: &str,
    namespace: &Namespace,
    schema: &str,
    location: &str,
) -> Result<()> {
    let err = db_err(location, "registering the namespace");
    let mut tx = client.transaction().map_err(&err)?;
    // One creator at a time: CREATE ... IF NOT EXISTS races with itself.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&super::writer::lock_key(&format!("hoprag namespaces {base}"))])
        .map_err(&err)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {base};
         CREATE TABLE IF NOT EXISTS {base}.hoprag_namespaces (name text PRIMARY KEY, schema text NOT NULL UNIQUE)"
    ))
    .map_err(&err)?;
    tx.execute(
        &format!("INSERT INTO {base}.hoprag_namespaces (name, schema) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING"),
        &[&namespace.as_str(), &schema],
    )
    .map_err(&err)?;
    tx.commit().map_err(&err)
}

/// The namespaces listed in `base` that hold an index, by name (the default one not
/// included).
pub(crate) fn listed(client: &mut impl GenericClient, base: &str, location: &str) -> Result<Vec<Namespace>> {
    let err = db_err(location, "listing the namespaces");
    let table = format!("{base}.hoprag_namespaces");
    let exists: Option<String> = client.query_one("SELECT to_regclass($1)::text", &[&table]).map_err(&err)?.get(0);
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let rows = client.query(&format!("SELECT name FROM {table} ORDER BY name"), &[]).map_err(&err)?;
    let mut names = Vec::new();
    for row in rows {
        // A row no valid name: not written by hoprag, never used as one.
        let Ok(namespace) = Namespace::new(row.get::<_, &str>(0)) else { continue };
        if holds_index(client, &schema_of(base, &namespace)?, location)? {
            names.push(namespace);
        }
    }
    Ok(names)
}

/// Whether `schema` has a live generation.
pub(crate) fn holds_index(client: &mut impl GenericClient, schema: &str, location: &str) -> Result<bool> {
    let err = db_err(location, "looking for an index");
    let table = format!("{schema}.current");
    let exists: Option<String> = client.query_one("SELECT to_regclass($1)::text", &[&table]).map_err(&err)?.get(0);
    if exists.is_none() {
        return Ok(false);
    }
    Ok(client.query_opt(&format!("SELECT 1 FROM {table} LIMIT 1"), &[]).map_err(&err)?.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_valid_name_gives_a_plain_schema() {
        for name in ["default", "2wiki-dev", "Acme.EU", &"x".repeat(64)] {
            let schema = schema_of("hoprag", &Namespace::new(name).unwrap()).unwrap();
            assert!(is_plain_identifier(&schema), "{name}: {schema}");
        }
        let a = schema_of("hoprag", &Namespace::new("A").unwrap()).unwrap();
        let b = schema_of("hoprag", &Namespace::new("a").unwrap()).unwrap();
        assert_ne!(a, b, "names differing in case are different namespaces");
        assert!(schema_of(&"s".repeat(50), &Namespace::new("a").unwrap()).is_err());
    }
}
