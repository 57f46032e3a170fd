//! The PostgreSQL tests' server and helpers (feature `postgres`): `tests/postgres.rs`
//! (the store) and `tests/postgres_edits.rs` (edits, readers, concurrent writers).
//!
//! The server: `HOPRAG_TEST_POSTGRES` (a URL) if set, else one started with
//! `scripts/postgres.sh start` in the cargo target's temporary folder (left running for
//! the next run; `scripts/postgres.sh stop target/tmp/hoprag-pg` stops it). When no
//! server can be had the tests say so and pass, unless `HOPRAG_REQUIRE_POSTGRES=1`.
//! Each test works in its own schema, dropped at its start.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use hoprag::corpus::{LoadedCorpus, Passage};
use hoprag::embed::{Embedder, TextKind};
use hoprag::index::VectorIndexKind;
use hoprag::progress::Silent;
use hoprag::store::edit::{edit, EditOptions, EditReport, Embedders, Request};
use hoprag::store::postgres::PgStore;
use hoprag::store::{BuildOptions, Store};
use hoprag::PassageIdx;

use super::HashEmbedder;

/// The server's URL, or `None` (after saying why) when there is none to test against.
pub fn server() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        let require = std::env::var("HOPRAG_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
        if let Ok(url) = std::env::var("HOPRAG_TEST_POSTGRES") {
            if !url.is_empty() {
                return Some(url);
            }
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hoprag-pg");
        let script = super::repo_root().join("scripts/postgres.sh");
        let out = Command::new("bash").arg(&script).arg("start").arg(&dir).stderr(Stdio::inherit()).output();
        match out {
            Ok(o) if o.status.success() => {
                let url = String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or("").trim().to_string();
                assert!(url.starts_with("postgres"), "postgres.sh printed no URL: {url:?}");
                Some(url)
            }
            other => {
                let why = match other {
                    Ok(o) => format!("{} exited with {}", script.display(), o.status),
                    Err(e) => format!("cannot run bash {}: {e}", script.display()),
                };
                assert!(!require, "HOPRAG_REQUIRE_POSTGRES=1 but no PostgreSQL server: {why}");
                eprintln!("skipping the PostgreSQL tests: no server ({why}); set HOPRAG_TEST_POSTGRES to a URL");
                None
            }
        }
    })
    .clone()
}

pub fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}schema={schema}")
}

/// A URL naming a fresh, empty schema `schema` on the test server.
pub fn fresh(schema: &str) -> Option<String> {
    let url = server()?;
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect to the test server");
    client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).unwrap();
    Some(with_schema(&url, schema))
}

pub fn pg(url: &str) -> Arc<dyn Store> {
    Arc::new(PgStore::connect(url).unwrap())
}

pub fn corpus(passages: Vec<Passage>) -> LoadedCorpus {
    LoadedCorpus { passages, ..Default::default() }
}

/// Deterministic synthetic passages `from..to` (tag distinguishes sets).
pub fn synthetic(tag: &str, from: usize, to: usize) -> Vec<Passage> {
    const WORDS: [&str; 12] = [
        "river", "castle", "harbour", "founded", "painter", "novel", "bridge", "mountain", "city", "king", "war",
        "song",
    ];
    (from..to)
        .map(|i| {
            let text: Vec<&str> = (0..12).map(|j| WORDS[(i * 7 + j * 5 + j * j) % WORDS.len()]).collect();
            Passage::new(format!("{tag}-{i}"), format!("{tag} {i}"), format!("{} {tag}{i} number {i}.", text.join(" ")))
        })
        .collect()
}

/// Applies `request` to the index in `store` with `embedder` (the passages' and the
/// graph's), as `hoprag add`, `delete` and `sync` do.
pub fn edit_with(
    store: &dyn Store,
    request: Request,
    source: &str,
    embedder: &HashEmbedder,
) -> hoprag::Result<EditReport> {
    let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder { id: embedder.id.clone(), dim: embedder.dim });
    let embedders = Embedders { passages: embedder.clone(), graph: embedder };
    let options = EditOptions { source: source.into(), ..Default::default() };
    edit(store, &request, &embedders, &options, &Silent)
}

/// Upserts `passages` into the index in `store`, as `hoprag add` does.
pub fn upsert(store: &dyn Store, passages: Vec<Passage>, source: &str, embedder: &HashEmbedder) -> EditReport {
    edit_with(store, Request::Upsert(passages), source, embedder).unwrap()
}

pub fn exact() -> BuildOptions {
    BuildOptions { vector_index: VectorIndexKind::Exact, overwrite: true, ..Default::default() }
}

pub fn embed(e: &dyn Embedder, text: &str) -> Vec<f32> {
    e.embed(&[text.to_string()], TextKind::Query).unwrap().remove(0)
}

pub const REL: f32 = 1e-4;

pub fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= REL * a.abs().max(b.abs()).max(1.0)
}

/// Two rankings agree: the same scores position by position (within 1e-4 relative),
/// and the same passages except where scores tie (within that tolerance), whose order
/// single and double precision may decide differently. Returns the positions whose
/// passage differed.
pub fn assert_same_ranking(what: &str, folder: &[(PassageIdx, f32)], pg: &[(PassageIdx, f32)]) -> usize {
    assert_eq!(folder.len(), pg.len(), "{what}: {folder:?} vs {pg:?}");
    let mut swapped = 0;
    for (i, (&(fi, fs), &(pi, ps))) in folder.iter().zip(pg).enumerate() {
        assert!(close(fs, ps), "{what}: rank {i} scores {fs} vs {ps}\n{folder:?}\n{pg:?}");
        if fi != pi {
            swapped += 1;
            let tied = folder.iter().any(|&(j, s)| j == pi && close(s, fs))
                || folder.last().is_some_and(|&(_, last)| close(last, fs));
            assert!(tied, "{what}: rank {i} is {fi} vs {pi} without a tie\n{folder:?}\n{pg:?}");
        }
    }
    swapped
}
