//! The PostgreSQL store (feature `postgres`): an index in a database with pgvector,
//! for teams that keep their data in PostgreSQL and serve queries from several
//! stateless processes.
//!
//! Layout (schema `hoprag` unless the URL says `?schema=NAME`; the migrations in
//! `crates/hoprag/migrations/postgres/` create the fixed tables):
//! ```text
//! generations        one row per generation: build, passages, tokens, graph, manifest
//! current            the live generation (one row), flipped in the writer's transaction
//! builds             one row per build (a Replace), with the vector dimension
//! passages_b<N>      build N's passages: idx, id, title, text, tokens, embedding vector(dim),
//!                    doc, meta (json) (+ pgvector HNSW index on builds made before schema
//!                    version 5)
//! lexical_files      each build's tantivy index files, in parts; a generation lists those
//!                    it reads (generations.lexical, with tantivy's meta.json)
//! hnsw_graphs        usearch HNSW graphs, in parts, keyed by build and passages; a
//!                    generation names the one it reads (generations.hnsw)
//! hnsw_slots         a graph's slot → row table, in parts, under the graph's key, once
//!                    an edit updated it (none: slot = row)
//! deltas             a delta generation's build (schema version 8): the whole generation
//!                    it is a delta on (base build, passages, tokens, HNSW record,
//!                    graph) and the base's rows it no longer holds ([`delta`])
//! delta_passages     the passages a delta adds, with their vectors, keyed by its build
//! postings_b<N>      build N's postings (term, passage, tf, dl), written before schema
//!                    version 3 only: BM25 in SQL for generations without lexical files
//! graphs             one row per attached graph: its counts and statistics
//! entities, triples, edges, passage_entities, passage_mentions   the graphs' rows,
//!                    keyed by graph id
//! hoprag_migrations  the schema versions applied
//! ```
//! A writer holds one transaction from the lock to the flip of `current`: a writer
//! killed or dropped before it commits leaves nothing behind, and readers (which read
//! a generation's rows in one repeatable-read transaction) see the old generation or
//! the new one. Every write of passages is a new build: a whole one (a build, an edit
//! past the delta limit, a compaction) with its passages table, or an edit's delta on
//! the last whole generation ([`delta`]: rows in proportion to the edit, the base's
//! rows read and the delta applied by every reader); a graph attached to the live
//! passages makes a generation of the same build. A generation of n passages reads the rows with idx < n (builds of schema
//! versions before 6 could grow by appends). After a commit the store keeps the new
//! generation, the one before it, and every older one an open index holds
//! ([`readers`]: a shared advisory lock per generation), and drops the rest with the
//! builds, graphs and files no kept generation uses, or whose delta names as its base.
//!
//! BM25 runs on tantivy, as on the folder store: each process that opens a generation
//! loads its index files into memory ([`lexical`]); generations written before schema
//! version 3 are still served by BM25 in SQL ([`SqlBm25`], tantivy's formula). Dense
//! search runs in this process over the vectors loaded into memory (PPR and PhaseGraph
//! need them all anyway): exactly, or when the manifest chose HNSW through the folder
//! store's usearch graph, kept in `hnsw_graphs` and loaded with the generation
//! ([`hnsw`]); generations written before schema version 5 search pgvector's HNSW
//! index ([`PgHnsw`]).

mod bm25;
mod delta;
mod graph;
mod hnsw;
mod lexical;
mod migrate;
mod namespaces;
mod parts;
mod readers;
mod writer;

pub use bm25::SqlBm25;
pub use hnsw::PgHnsw;

use std::sync::Arc;
use std::time::Duration;

use postgres::binary_copy::BinaryCopyOutIter;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::Type;
use postgres::{GenericClient, NoTls};
use r2d2_postgres::PostgresConnectionManager;

use super::{LiveParts, Namespace, Open, PassagesPart, Staged, Store, StoreWriter, StoredGraph};
use crate::corpus::{Meta, Passage};
use crate::error::{Error, Result};
use crate::index::{
    Derived, HnswIndex, Index, LexicalIndex, Manifest, Matrix, PartedBm25, VectorIndex, VectorIndexKind,
};

type Pool = r2d2::Pool<PostgresConnectionManager<NoTls>>;
type Conn = r2d2::PooledConnection<PostgresConnectionManager<NoTls>>;

/// Connections per store: one writer, a load beside it and concurrent queries of a
/// server. (Readers' locks are on one more connection of their own: [`readers`].)
const POOL_SIZE: u32 = 4;
/// Times a load reads the live generation again when writers publish newer ones while it
/// takes its hold.
const LOAD_ATTEMPTS: usize = 20;
/// How long a query waits for a connection before it reports the database unreachable.
const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP connect timeout when the URL sets none.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The schema when the URL names none.
pub const DEFAULT_SCHEMA: &str = "hoprag";
/// Memory per sort or hash of a query on the store's connections.
const WORK_MEM: &str = "64MB";
/// pgvector's first version with HNSW.
const MIN_PGVECTOR: (u32, u32) = (0, 5);

/// An index in a PostgreSQL database.
pub struct PgStore {
    pool: Pool,
    schema: String,
    location: String,
    readers: Arc<readers::Readers>,
    /// Lexical parts this process holds open (an edited generation shares all but one).
    lexical_parts: lexical::OpenParts,
}

/// In a staged edit's folder ([`Store::stage`]): the lexical collection's layout, ids and
/// new part.
const STAGED_LEXICAL: &str = "lexical";

/// What a generation row says.
#[derive(Debug, Clone)]
pub(crate) struct Generation {
    pub id: i64,
    pub build: i64,
    pub passages: usize,
    pub tokens: i64,
    pub graph: Option<i64>,
    pub manifest: Manifest,
    /// The generation's tantivy index; `None` for generations written before schema
    /// version 3 (BM25 in SQL).
    pub lexical: Option<lexical::LexicalFiles>,
    /// The generation's HNSW graph; `None` without HNSW, and for generations written
    /// before schema version 5 (pgvector's HNSW index).
    pub hnsw: Option<hnsw::StoredHnsw>,
    /// Where the generation is a delta on a whole one (its build's `deltas` row, schema
    /// version 8): that one's rows and the base rows it removed.
    pub delta: Option<delta::StoredDelta>,
}

impl PgStore {
    /// Connects to `url` (`postgres://USER[:PASSWORD]@HOST:PORT/DB?schema=NAME`, or any
    /// form the `postgres` crate accepts, e.g. `host=/socket/dir` as a parameter),
    /// checks that pgvector is there (creating the extension if the user may), and
    /// creates or upgrades the schema.
    pub fn connect(url: &str) -> Result<PgStore> {
        Self::connect_in(url, &Namespace::default(), Open::OrCreate)
    }

    /// [`PgStore::connect`] to namespace `namespace` of the store: its own schema beside
    /// the URL's ([`namespaces`]); the default namespace is the URL's schema itself.
    pub fn connect_in(url: &str, namespace: &Namespace, mode: Open) -> Result<PgStore> {
        let mut location = super::redact(url);
        let (client_url, base) = split_schema(url).map_err(|m| Error::Config(format!("{location}: {m}")))?;
        let mut config = client_config(&client_url, &location)?;
        let mut client = config.connect(NoTls).map_err(|e| unreachable(&location, &config, &e))?;
        let schema = namespaces::schema_of(&base, namespace).map_err(|e| Error::Config(format!("{location}: {e}")))?;
        if !namespace.is_default() {
            let store = location.clone();
            location = format!("{location} (namespace {namespace})");
            match mode {
                Open::Existing if !namespaces::holds_index(&mut client, &schema, &location)? => {
                    return Err(super::namespace::not_found(&store, namespace));
                }
                Open::Existing => {}
                Open::OrCreate => namespaces::register(&mut client, &base, namespace, &schema, &location)?,
            }
        }
        let vector_schema = ensure_pgvector(&mut client, &location)?;
        migrate::run(&mut client, &schema, &vector_schema, &location)?;
        drop(client);
        // Every pooled connection resolves the store's tables and pgvector's type by
        // name (schema names are checked to be plain lowercase identifiers).
        // work_mem: BM25's hash aggregates over the postings of frequent terms (hundreds
        // of thousands of rows at 100 K passages) spill to disk at the default 4 MB.
        let search_path = format!("-c search_path={schema},{vector_schema} -c work_mem={WORK_MEM}");
        let options = match config.get_options() {
            Some(o) if !o.is_empty() => format!("{o} {search_path}"),
            _ => search_path,
        };
        config.options(&options);
        let readers = Arc::new(readers::Readers::new(config.clone(), &schema, &location));
        let manager = PostgresConnectionManager::new(config, NoTls);
        // test_on_check_out: a connection broken by a database restart is replaced on
        // the next checkout, so a server keeps answering once the database is back.
        let pool = r2d2::Pool::builder()
            .max_size(POOL_SIZE)
            .min_idle(Some(0))
            .test_on_check_out(true)
            .connection_timeout(CHECKOUT_TIMEOUT)
            .build_unchecked(manager);
        Ok(PgStore { pool, schema, location, readers, lexical_parts: Default::default() })
    }

    /// The namespaces of the store `url` names that hold an index, the default first
    /// when it holds one.
    pub fn namespaces(url: &str) -> Result<Vec<Namespace>> {
        let location = super::redact(url);
        let (client_url, base) = split_schema(url).map_err(|m| Error::Config(format!("{location}: {m}")))?;
        let config = client_config(&client_url, &location)?;
        let mut client = config.connect(NoTls).map_err(|e| unreachable(&location, &config, &e))?;
        let mut names = Vec::new();
        if namespaces::holds_index(&mut client, &base, &location)? {
            names.push(Namespace::default());
        }
        names.extend(namespaces::listed(&mut client, &base, &location)?);
        Ok(names)
    }

    /// The schema the store's tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    fn conn(&self) -> Result<Conn> {
        checkout(&self.pool, &self.location)
    }

    fn err<'a>(&'a self, what: &'a str) -> impl Fn(postgres::Error) -> Error + 'a {
        db_err(&self.location, what)
    }

    /// A read-only transaction that sees one snapshot: a generation row and its rows.
    fn snapshot<'c>(&self, conn: &'c mut Conn) -> Result<postgres::Transaction<'c>> {
        conn.build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(self.err("starting a read"))
    }

    fn live(&self, client: &mut impl GenericClient) -> Result<Generation> {
        current(client, &self.location)?.ok_or_else(|| super::no_index(&self.location))
    }

    /// [`Store::load`] of delta generation `g` ([`delta`]), in the read's snapshot `tx`:
    /// its base's passages and vectors with the delta applied, its own tantivy files, the
    /// base's HNSW graph updated in memory as an edit updates it.
    fn load_delta(
        &self,
        mut tx: postgres::Transaction<'_>,
        g: Generation,
        d: &delta::StoredDelta,
        hold: Option<readers::Hold>,
    ) -> Result<Index> {
        let location = &self.location;
        if let Some(info) = &g.manifest.delta {
            if info.base_passages != d.base.passages || info.removed != d.removed.len() {
                return Err(Error::index(
                    location,
                    format!(
                        "generation {}: the manifest's delta ({} passages removed of {}) is not the stored one                          ({} of {})",
                        g.id,
                        info.removed,
                        info.base_passages,
                        d.removed.len(),
                        d.base.passages
                    ),
                ));
            }
        }
        let (passages, vectors, of_base, base_passages) = delta::read(&mut tx, &g, d, location)?;
        let lexical: Arc<dyn LexicalIndex> = match &g.lexical {
            Some(files) => lexical::open(&mut tx, g.build, files, &self.lexical_parts, location)?,
            None => return Err(Error::index(location, format!("generation {}: a delta without lexical files", g.id))),
        };
        let ann: Option<Arc<dyn VectorIndex>> = match (g.manifest.vector_index, &d.base.hnsw) {
            (VectorIndexKind::Hnsw, Some(stored)) => {
                let (dim, params) = (g.manifest.embedder.dim, g.manifest.hnsw);
                let base = hnsw::open(&mut tx, g.id, d.base.build, stored, dim, params, location)?;
                Some(Arc::new(base.after_edit(&vectors, &of_base)?.0))
            }
            // A base served by pgvector's index (schema versions before 5): built here.
            (VectorIndexKind::Hnsw, None) => Some(Arc::new(HnswIndex::build(&vectors, g.manifest.hnsw)?)),
            _ => None,
        };
        tx.commit().map_err(self.err("ending a read"))?;
        let index = Index::from_parts(location, g.id.to_string(), g.manifest, passages, vectors, lexical, ann)?;
        Ok(index.derived_from(Derived { base_passages, of_base }).holding(hold))
    }
}

impl Store for PgStore {
    fn location(&self) -> &str {
        &self.location
    }

    fn generation(&self) -> Result<Option<String>> {
        let mut conn = self.conn()?;
        let row = conn.query_opt("SELECT generation FROM current", &[]).map_err(self.err("reading the generation"))?;
        Ok(row.map(|r| r.get::<_, i64>(0).to_string()))
    }

    fn manifest(&self) -> Result<Option<Manifest>> {
        let mut conn = self.conn()?;
        Ok(current(&mut *conn, &self.location)?.map(|g| g.manifest))
    }

    fn load(&self) -> Result<Index> {
        let mut conn = self.conn()?;
        // The live generation, held before its rows are read: a writer that publishes
        // meanwhile removes it only if no hold is there, and then the snapshot sees a
        // newer live one, which is read instead.
        let mut attempt = 0;
        let (hold, mut tx, g) = loop {
            let id: i64 = conn
                .query_opt("SELECT generation FROM current", &[])
                .map_err(self.err("reading the generation"))?
                .ok_or_else(|| super::no_index(&self.location))?
                .get(0);
            let hold = self.readers.hold(id)?;
            // One snapshot for the generation row and its rows.
            let mut tx = self.snapshot(&mut conn)?;
            let g = self.live(&mut tx)?;
            if hold.is_some() && g.id == id {
                break (hold, tx, g);
            }
            drop(tx);
            attempt += 1;
            if attempt == LOAD_ATTEMPTS {
                return Err(Error::index(
                    &self.location,
                    format!("other writers published {attempt} generations while this one was opened; try again"),
                ));
            }
        };
        if let Some(d) = g.delta.clone() {
            return self.load_delta(tx, g, &d, hold);
        }
        let (passages, vectors) = read_passages(&mut tx, &g, &self.location)?;
        let lexical: Arc<dyn LexicalIndex> = match &g.lexical {
            Some(files) => lexical::open(&mut tx, g.build, files, &self.lexical_parts, &self.location)?,
            None => Arc::new(SqlBm25::new(self.pool.clone(), &self.location, g.build, g.passages, g.tokens)?),
        };
        let ann: Option<Arc<dyn VectorIndex>> = match (g.manifest.vector_index, &g.hnsw) {
            (VectorIndexKind::Hnsw, Some(stored)) => {
                let dim = g.manifest.embedder.dim;
                Some(Arc::new(hnsw::open(&mut tx, g.id, g.build, stored, dim, g.manifest.hnsw, &self.location)?))
            }
            (VectorIndexKind::Hnsw, None) => Some(Arc::new(PgHnsw::new(
                self.pool.clone(),
                &self.location,
                g.build,
                g.passages,
                crate::index::hnsw_breadth(&g.manifest.hnsw, g.passages),
            ))),
            _ => None,
        };
        tx.commit().map_err(self.err("ending a read"))?;
        Ok(Index::from_parts(&self.location, g.id.to_string(), g.manifest, passages, vectors, lexical, ann)?
            .holding(hold))
    }

    fn open_live(&self, generation: &str) -> Result<Option<LiveParts>> {
        let Ok(id) = generation.parse::<i64>() else { return Ok(None) };
        let mut conn = self.conn()?;
        let Some(hold) = self.readers.hold(id)? else { return Ok(None) };
        let mut tx = self.snapshot(&mut conn)?;
        let g = self.live(&mut tx)?;
        if g.id != id {
            return Ok(None);
        }
        let lexical: Arc<dyn LexicalIndex> = match &g.lexical {
            Some(files) => lexical::open(&mut tx, g.build, files, &self.lexical_parts, &self.location)?,
            None => Arc::new(SqlBm25::new(self.pool.clone(), &self.location, g.build, g.passages, g.tokens)?),
        };
        tx.commit().map_err(self.err("ending a read"))?;
        Ok(Some(LiveParts { manifest: g.manifest, lexical, hold: Box::new(hold) }))
    }

    /// An edit written as a delta, from a collection in parts: its new lexical part is
    /// built here, ahead of the writer's lock, and stored at the commit with the
    /// collection's ids; the parts it keeps stay in the database.
    fn stage(&self, base: &Index, part: PassagesPart<'_>) -> Result<Option<Staged>> {
        let Some(previous) = base.lexical().as_parted().filter(|_| part.delta.is_some()) else { return Ok(None) };
        let started = std::time::Instant::now();
        let dir =
            tempfile::tempdir().map_err(|e| Error::Other(format!("a temporary folder for the lexical index: {e}")))?;
        let text = |i: usize| std::borrow::Cow::Owned(part.passages[i].index_text());
        PartedBm25::stage_after(&dir.path().join(STAGED_LEXICAL), previous, &text, part.kept, &|_| {})?;
        let times = super::WriteTimes { lexical_secs: started.elapsed().as_secs_f64(), ..Default::default() };
        Ok(Some(Staged { dir, lock: None, times }))
    }

    fn stored_graph(&self, index: &Index) -> Result<Option<StoredGraph>> {
        if index.manifest.graph.is_none() {
            return Ok(None);
        }
        let id: i64 = index
            .generation()
            .parse()
            .map_err(|_| Error::index(&self.location, format!("{:?} is not a generation id", index.generation())))?;
        let mut conn = self.conn()?;
        let mut tx = self.snapshot(&mut conn)?;
        let row = tx
            .query_opt(
                "SELECT g.graph, d.build IS NOT NULL, d.base_graph FROM generations g \
                 LEFT JOIN deltas d ON d.build = g.build WHERE g.id = $1",
                &[&id],
            )
            .map_err(self.err("reading the generation"))?
            .ok_or_else(|| {
                Error::index(&self.location, format!("generation {id} is gone (a newer index replaced it); reload"))
            })?;
        let dim = index.manifest.graph_embedder().dim;
        let (own, is_delta, base_graph) =
            (row.get::<_, Option<i64>>(0), row.get::<_, bool>(1), row.get::<_, Option<i64>>(2));
        let stored = match (own, base_graph) {
            (Some(graph_id), _) => StoredGraph::Own(graph::read(&mut tx, graph_id, dim, &self.location)?),
            // A delta generation whose graph was not stored: derived from its base's.
            (None, Some(base_id)) if is_delta => StoredGraph::Base(graph::read(&mut tx, base_id, dim, &self.location)?),
            _ => {
                return Err(Error::index(
                    &self.location,
                    format!("generation {id}: the manifest names a graph the store lacks"),
                ))
            }
        };
        tx.commit().map_err(self.err("ending a read"))?;
        Ok(Some(stored))
    }

    /// Edits are written as deltas ([`delta`]) on every live generation but a whole one
    /// whose HNSW search is pgvector's index (written before schema version 5): its
    /// readers would build the in-process graph at every load, so its next edit writes a
    /// whole build with one instead.
    fn keeps_deltas(&self) -> bool {
        let live = self.conn().and_then(|mut conn| current(&mut *conn, &self.location));
        match live {
            Ok(Some(g)) => g.delta.is_some() || g.manifest.vector_index != VectorIndexKind::Hnsw || g.hnsw.is_some(),
            Ok(None) => true,
            Err(e) => {
                log::warn!("{}: {e}; the edit is written whole", self.location);
                false
            }
        }
    }

    fn writer(&self) -> Result<Box<dyn StoreWriter + '_>> {
        Ok(Box::new(writer::PgWriter::begin(self)?))
    }

    fn size_bytes(&self) -> Result<u64> {
        let mut conn = self.conn()?;
        let g = self.live(&mut *conn)?;
        // A delta generation reads its base's passages, and its own added ones.
        let mut tables = match &g.delta {
            Some(d) => vec![passages_table(d.base.build), "delta_passages".to_string()],
            None => vec![passages_table(g.build)],
        };
        // The tantivy files the generation reads, or the postings of an older one.
        let lexical_bytes = match &g.lexical {
            Some(l) => l.bytes(),
            None => {
                tables.push(postings_table(g.build));
                0
            }
        };
        let hnsw = g.delta.as_ref().map_or(g.hnsw, |d| d.base.hnsw);
        let hnsw_bytes = hnsw.map_or(0, |h| h.bytes + h.slots.unwrap_or(0));
        if g.graph.or(g.delta.as_ref().and_then(|d| d.base.graph)).is_some() {
            // Shared by every graph the store keeps (the live one, the previous
            // generation's and those of generations readers hold).
            tables.extend(
                [
                    "graphs",
                    "entities",
                    "facts",
                    "triples",
                    "edges",
                    "passage_entities",
                    "passage_mentions",
                    "graph_walks",
                ]
                .map(String::from),
            );
        }
        let row = conn
            .query_one(
                "SELECT coalesce(sum(pg_total_relation_size(t::regclass)), 0)::bigint FROM unnest($1::text[]) t",
                &[&tables],
            )
            .map_err(self.err("measuring the tables"))?;
        Ok(row.get::<_, i64>(0).max(0) as u64 + lexical_bytes + hnsw_bytes)
    }
}

pub(crate) fn passages_table(build: i64) -> String {
    format!("passages_b{build}")
}

pub(crate) fn postings_table(build: i64) -> String {
    format!("postings_b{build}")
}

/// The live generation, if any.
pub(crate) fn current(client: &mut impl GenericClient, location: &str) -> Result<Option<Generation>> {
    let row = client
        .query_opt(
            &format!(
                "SELECT g.id, g.build, g.passages, g.tokens, g.graph, g.manifest::text, g.lexical::text, \
                 g.hnsw::text, {} FROM current c JOIN generations g ON g.id = c.generation \
                 LEFT JOIN deltas d ON d.build = g.build",
                delta::COLUMNS
            ),
            &[],
        )
        .map_err(db_err(location, "reading the live generation"))?;
    let Some(row) = row else { return Ok(None) };
    let id: i64 = row.get(0);
    let manifest: String = row.get(5);
    let manifest: Manifest = serde_json::from_str(&manifest)
        .map_err(|e| Error::index(location, format!("generation {id}: invalid manifest: {e}")))?;
    let lexical: Option<String> = row.get(6);
    let lexical = lexical
        .map(|l| serde_json::from_str(&l))
        .transpose()
        .map_err(|e| Error::index(location, format!("generation {id}: invalid lexical file list: {e}")))?;
    let hnsw: Option<String> = row.get(7);
    let hnsw = hnsw
        .map(|h| serde_json::from_str(&h))
        .transpose()
        .map_err(|e| Error::index(location, format!("generation {id}: invalid HNSW graph record: {e}")))?;
    Ok(Some(Generation {
        id,
        build: row.get(1),
        passages: row.get::<_, i32>(2) as usize,
        tokens: row.get(3),
        graph: row.get(4),
        manifest,
        lexical,
        hnsw,
        delta: delta::StoredDelta::from_row(&row, 8, location)?,
    }))
}

/// The generation's passages and vectors, in index order, read with a binary COPY.
fn read_passages(client: &mut impl GenericClient, g: &Generation, location: &str) -> Result<(Vec<Passage>, Matrix)> {
    read_rows(client, g.build, g.passages, g.manifest.embedder.dim, &format!("generation {}", g.id), location)
}

/// Rows idx < `n` of build `build`'s passages and their vectors (of dimension `dim`), in
/// index order, read with a binary COPY; `what` names them in errors.
pub(crate) fn read_rows(
    client: &mut impl GenericClient,
    build: i64,
    n: usize,
    dim: usize,
    what: &str,
    location: &str,
) -> Result<(Vec<Passage>, Matrix)> {
    let vector = vector_type(client, location)?;
    let sql = format!(
        "COPY (SELECT idx, id, title, text, embedding, doc, meta FROM {} WHERE idx < {} ORDER BY idx) \
         TO STDOUT (FORMAT binary)",
        passages_table(build),
        n
    );
    let err = db_err(location, "reading passages");
    let reader = client.copy_out(sql.as_str()).map_err(&err)?;
    let types = [Type::INT4, Type::TEXT, Type::TEXT, Type::TEXT, vector, Type::TEXT, Type::JSON];
    let mut rows = BinaryCopyOutIter::new(reader, &types);
    let mut passages = Vec::with_capacity(n);
    let mut data = Vec::with_capacity(n * dim);
    while let Some(row) = rows.next().map_err(&err)? {
        let idx: i32 = row.try_get(0).map_err(&err)?;
        if idx as usize != passages.len() {
            return Err(Error::index(
                location,
                format!("{}: passage {} is missing (found {idx} next)", passages_table(build), passages.len()),
            ));
        }
        let v: pgvector::Vector = row.try_get(4).map_err(&err)?;
        if v.as_slice().len() != dim {
            return Err(Error::index(
                location,
                format!("passage {idx} has a vector of dimension {}, the manifest says {dim}", v.as_slice().len()),
            ));
        }
        data.extend_from_slice(v.as_slice());
        passages.push(Passage {
            id: row.try_get(1).map_err(&err)?,
            title: row.try_get(2).map_err(&err)?,
            text: row.try_get(3).map_err(&err)?,
            doc: row.try_get(5).map_err(&err)?,
            meta: row.try_get::<Option<postgres::types::Json<Meta>>>(6).map_err(&err)?.map(|m| m.0),
        });
    }
    if passages.len() != n {
        return Err(Error::index(location, format!("{what} has {n} passages, the store holds {}", passages.len())));
    }
    Ok((passages, Matrix::from_flat(dim.max(1), data)))
}

/// pgvector's `vector` type as this database knows it (an extension type has no fixed
/// OID), for binary COPY.
pub(crate) fn vector_type(client: &mut impl GenericClient, location: &str) -> Result<Type> {
    let stmt = client.prepare("SELECT NULL::vector").map_err(db_err(location, "looking up pgvector's type"))?;
    Ok(stmt.columns()[0].type_().clone())
}

pub(crate) fn checkout(pool: &Pool, location: &str) -> Result<Conn> {
    pool.get().map_err(|e| Error::index(location, format!("the database is unreachable: {e}")))
}

/// Maps a client error to one that names the store and what was being done.
pub(crate) fn db_err<'a>(location: &'a str, what: &'a str) -> impl Fn(postgres::Error) -> Error + 'a {
    move |e| Error::index(location, format!("{what}: {}", describe(&e)))
}

/// A client error in one line: the server's message (with its detail and hint) or the
/// client's.
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} ({})", db.message(), db.code().code());
            if let Some(d) = db.detail() {
                s.push_str(&format!("; {d}"));
            }
            if let Some(h) = db.hint() {
                s.push_str(&format!("; hint: {h}"));
            }
            s
        }
        None => {
            let mut s = e.to_string();
            if let Some(src) = std::error::Error::source(e) {
                let src = src.to_string();
                if !s.contains(&src) {
                    s.push_str(&format!(": {src}"));
                }
            }
            s
        }
    }
}

/// The error for a server that cannot be reached, naming where the client tried.
fn unreachable(location: &str, config: &postgres::Config, e: &postgres::Error) -> Error {
    let ports = config.get_ports();
    let targets: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match h {
                postgres::config::Host::Tcp(host) => format!("{host}:{port}"),
                #[cfg(unix)]
                postgres::config::Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
            }
        })
        .collect();
    let targets = if targets.is_empty() { "the default host".to_string() } else { targets.join(", ") };
    Error::index(location, format!("cannot connect to PostgreSQL at {targets}: {}", describe(e)))
}

/// Checks that pgvector (with HNSW) is installed in the database, creating the extension
/// when the user may; returns the schema its types live in.
fn ensure_pgvector(client: &mut postgres::Client, location: &str) -> Result<String> {
    let find = "SELECT e.extversion, n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace \
                WHERE e.extname = 'vector'";
    let err = db_err(location, "looking for pgvector");
    let mut row = client.query_opt(find, &[]).map_err(&err)?;
    if row.is_none() {
        if let Err(e) = client.batch_execute("CREATE EXTENSION IF NOT EXISTS vector") {
            let available = client
                .query_opt("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'", &[])
                .ok()
                .flatten()
                .map(|r| r.get::<_, Option<String>>(0).unwrap_or_default());
            return Err(Error::index(location, no_pgvector(available.as_deref(), &describe(&e))));
        }
        row = client.query_opt(find, &[]).map_err(&err)?;
    }
    let row = row.ok_or_else(|| Error::index(location, no_pgvector(None, "the extension did not appear")))?;
    let version: String = row.get(0);
    if !version_at_least(&version, MIN_PGVECTOR) {
        return Err(Error::index(
            location,
            format!(
                "pgvector {version} is installed; hoprag needs pgvector >= {}.{} (HNSW): \
                 ALTER EXTENSION vector UPDATE after installing a newer one",
                MIN_PGVECTOR.0, MIN_PGVECTOR.1
            ),
        ));
    }
    let schema: String = row.get(1);
    if !is_plain_identifier(&schema) {
        return Err(Error::index(
            location,
            format!("pgvector is installed in schema {schema:?}; hoprag expects a plain lowercase schema name"),
        ));
    }
    Ok(schema)
}

/// What to do when `CREATE EXTENSION vector` failed: `available` is the version the
/// server could install (None when it has no pgvector at all), `client` the server's
/// refusal.
pub(crate) fn no_pgvector(available: Option<&str>, client: &str) -> String {
    let need = format!("pgvector >= {}.{} (for HNSW)", MIN_PGVECTOR.0, MIN_PGVECTOR.1);
    match available {
        Some(v) => format!(
            "the database lacks the `vector` extension and CREATE EXTENSION IF NOT EXISTS vector failed ({client}); \
             the server has pgvector {v}: have a superuser run CREATE EXTENSION vector in this database \
             (hoprag needs {need})"
        ),
        None => format!(
            "the database lacks the `vector` extension and the server has no pgvector to install ({client}); \
             install {need} on the server, then CREATE EXTENSION IF NOT EXISTS vector"
        ),
    }
}

fn version_at_least(version: &str, (major, minor): (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// A lowercase SQL identifier that needs no quoting (so it can sit in a search_path).
/// The client configuration of a URL without its `schema` parameter.
fn client_config(client_url: &str, location: &str) -> Result<postgres::Config> {
    let mut config: postgres::Config =
        client_url.parse().map_err(|e| Error::Config(format!("{location}: not a PostgreSQL URL: {e}")))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok(config)
}

fn is_plain_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && s.len() <= 63
}

/// Splits `schema=NAME` off a URL's parameters (the client rejects parameters it does
/// not know): the URL to connect with and the schema.
fn split_schema(url: &str) -> std::result::Result<(String, String), String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut schema = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("schema", value)) => schema = Some(value.to_string()),
            _ => rest.push(pair),
        }
    }
    let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_string());
    if !is_plain_identifier(&schema) {
        return Err(format!(
            "schema {schema:?} is not a plain lowercase identifier (letters a-z, digits, _; at most 63)"
        ));
    }
    let url = if rest.is_empty() { base.to_string() } else { format!("{base}?{}", rest.join("&")) };
    Ok((url, schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_split_off_and_checked() {
        let (url, schema) = split_schema("postgres://u@h:5/db?schema=t1&sslmode=disable").unwrap();
        assert_eq!((url.as_str(), schema.as_str()), ("postgres://u@h:5/db?sslmode=disable", "t1"));
        let (url, schema) = split_schema("postgres://u@h:5/db").unwrap();
        assert_eq!((url.as_str(), schema.as_str()), ("postgres://u@h:5/db", "hoprag"));
        let (url, _) = split_schema("postgresql://u@%2Ftmp%2Fpg:5/db?schema=x").unwrap();
        assert_eq!(url, "postgresql://u@%2Ftmp%2Fpg:5/db");
        assert!(split_schema("postgres://u@h/db?schema=Robert').drop").unwrap_err().contains("not a plain"));
        assert!(split_schema("postgres://u@h/db?schema=").is_err());
    }

    #[test]
    fn pgvector_messages_say_what_to_do() {
        let m = no_pgvector(None, "extension \"vector\" is not available (0A000)");
        assert!(m.contains("install pgvector >= 0.5") && m.contains("CREATE EXTENSION IF NOT EXISTS vector"), "{m}");
        let m = no_pgvector(Some("0.6.2"), "permission denied to create extension \"vector\" (42501)");
        assert!(m.contains("superuser") && m.contains("0.6.2") && m.contains("permission denied"), "{m}");
        assert!(version_at_least("0.6.2", MIN_PGVECTOR) && version_at_least("1.0", MIN_PGVECTOR));
        assert!(!version_at_least("0.4.4", MIN_PGVECTOR));
    }
}
