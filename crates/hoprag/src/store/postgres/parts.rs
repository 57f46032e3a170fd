//! Files kept in tables of parts: the tantivy index (`lexical_files`), the graph's walk
//! (`graph_walks`), the HNSW graph (`hnsw_graphs`) and its slot table (`hnsw_slots`). One copy of the splitting and of
//! the checks on reading, so that every such table fails the same clear way when a row
//! is missing or short.

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use postgres::GenericClient;

use super::db_err;
use crate::error::{Error, Result};

/// Bytes per part. A part is one message on the connection, buffered whole on both ends,
/// and a pooled connection keeps a read buffer the size of the largest message it has
/// received: with 32 MB parts a server held 46 MB more after opening 100,000 passages
/// than with 2 MB ones (docs/postgres.md). Rows from earlier versions, in parts of 32 or
/// 64 MB, read the same.
pub(crate) const PART_BYTES: usize = 2 << 20;

/// A table of parts: `(key..., part int, bytes bytea)`, `part` counting from 0.
pub(crate) struct Table {
    pub name: &'static str,
    /// The columns that name one file, with their types (for binary COPY).
    pub key: &'static [(&'static str, Type)],
}

pub(crate) const LEXICAL: Table = Table { name: "lexical_files", key: &[("build", Type::INT8), ("name", Type::TEXT)] };
pub(crate) const WALKS: Table = Table { name: "graph_walks", key: &[("graph", Type::INT8)] };
pub(crate) const HNSW: Table = Table { name: "hnsw_graphs", key: &[("build", Type::INT8), ("passages", Type::INT4)] };
pub(crate) const SLOTS: Table = Table { name: "hnsw_slots", key: &[("build", Type::INT8), ("passages", Type::INT4)] };

/// Parts being copied into a table: one COPY for any number of files.
pub(crate) struct Writer<'c> {
    copy: BinaryCopyInWriter<'c>,
    table: &'static str,
    location: String,
}

impl Table {
    pub(crate) fn writer<'c>(&self, client: &'c mut impl GenericClient, location: &str) -> Result<Writer<'c>> {
        let columns: Vec<&str> = self.key.iter().map(|k| k.0).collect();
        let sql = format!("COPY {} ({}, part, bytes) FROM STDIN (FORMAT binary)", self.name, columns.join(", "));
        let mut types: Vec<Type> = self.key.iter().map(|k| k.1.clone()).collect();
        types.extend([Type::INT4, Type::BYTEA]);
        let copy = client.copy_in(sql.as_str()).map_err(db_err(location, &format!("storing {}", self.name)))?;
        Ok(Writer { copy: BinaryCopyInWriter::new(copy, &types), table: self.name, location: location.to_string() })
    }

    /// The file named by `key`, its parts joined; `None` when the table has no part of
    /// it. `what` names the file in errors (e.g. "the HNSW graph of generation 7");
    /// `bytes`, when known, is the size the file must have.
    pub(crate) fn read(
        &self,
        client: &mut impl GenericClient,
        key: &[&(dyn ToSql + Sync)],
        what: &str,
        bytes: Option<u64>,
        location: &str,
    ) -> Result<Option<Vec<u8>>> {
        let filter: Vec<String> = self.key.iter().enumerate().map(|(i, k)| format!("{} = ${}", k.0, i + 1)).collect();
        let sql = format!("SELECT part, bytes FROM {} WHERE {} ORDER BY part", self.name, filter.join(" AND "));
        let err = db_err(location, "reading stored parts");
        let mut rows = client.query_raw(sql.as_str(), key.iter().copied()).map_err(&err)?;
        let mut data = Vec::new();
        // Reserved up front (no copies as it grows) unless a damaged record asks for
        // more than can be had: the size check below then names the damage.
        let _ = data.try_reserve_exact(bytes.unwrap_or(0).min(isize::MAX as u64) as usize);
        let mut parts = 0i32;
        while let Some(row) = rows.next().map_err(&err)? {
            if row.get::<_, i32>(0) != parts {
                return Err(Error::index(location, format!("{what} lacks part {parts} in table {}", self.name)));
            }
            data.extend_from_slice(row.get::<_, &[u8]>(1));
            parts += 1;
        }
        if parts == 0 {
            return Ok(None);
        }
        match bytes {
            Some(b) if b != data.len() as u64 => Err(Error::index(
                location,
                format!("{what} holds {} bytes in table {}, the generation says {b}", data.len(), self.name),
            )),
            _ => Ok(Some(data)),
        }
    }

    /// [`read`](Self::read) of a file that must be there.
    pub(crate) fn read_required(
        &self,
        client: &mut impl GenericClient,
        key: &[&(dyn ToSql + Sync)],
        what: &str,
        bytes: Option<u64>,
        location: &str,
    ) -> Result<Vec<u8>> {
        self.read(client, key, what, bytes, location)?
            .ok_or_else(|| Error::index(location, format!("{what} is missing from table {}", self.name)))
    }
}

impl Writer<'_> {
    /// Adds the file named by `key` (the table's key columns, in order).
    pub(crate) fn put(&mut self, key: &[&(dyn ToSql + Sync)], bytes: &[u8]) -> Result<()> {
        let err = db_err(&self.location, "storing parts");
        // An empty file is one empty part, so that every stored file has part 0.
        let parts: Vec<&[u8]> = if bytes.is_empty() { vec![&[]] } else { bytes.chunks(PART_BYTES).collect() };
        for (part, chunk) in parts.into_iter().enumerate() {
            let part = part as i32;
            let mut row: Vec<&(dyn ToSql + Sync)> = key.to_vec();
            row.push(&part);
            row.push(&chunk);
            self.copy.write(&row).map_err(&err)?;
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<()> {
        self.copy.finish().map(|_| ()).map_err(db_err(&self.location, &format!("storing {}", self.table)))
    }
}
