//! `hoprag add`, `delete`, `sync` and `export` (documents, triples, graph): a living corpus. Each edit
//! publishes one new generation with every method's structures (vectors, BM25
//! statistics, the entity graph and its walk) brought up to date: the index is then the
//! one `hoprag index` builds from the same documents.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use hoprag::store::edit::{edit, EditOptions, EditReport, Embedders, Request, WalkUpdate};
use hoprag::store::{Open, Store};

use super::index::{print_ingest, CorpusArgs};
use super::Context;

/// Where the index is, and how an edit is applied: shared by add, delete and sync.
#[derive(Args)]
pub struct EditTarget {
    /// The index: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`
    /// (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// Print what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Where the edit writes the index whole (past the delta limit), do not solve the
    /// graph's passage walk now: graph methods run the exact full walk (the same rankings,
    /// slower) until `hoprag graph --walk` stores one. An edit written as a delta solves
    /// no walk either way: its readers derive the graph.
    #[arg(long)]
    defer_walk: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CompactArgs {
    /// The index: a folder, or a PostgreSQL URL (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct AddArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    #[command(flatten)]
    pub target: EditTarget,
}

#[derive(Args)]
pub struct DeleteArgs {
    /// Ids of documents (all their passages) or of single passages.
    #[arg(value_name = "ID")]
    ids: Vec<String>,
    /// Also read ids from this file, one a line (`-`: standard input).
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    #[command(flatten)]
    pub target: EditTarget,
}

#[derive(Args)]
pub struct SyncArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Allow a corpus with no passages, which deletes every document of the index.
    #[arg(long)]
    allow_empty: bool,
    #[command(flatten)]
    pub target: EditTarget,
}

#[derive(Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    what: Export,
}

impl ExportArgs {
    pub fn json(&self) -> bool {
        match &self.what {
            Export::Documents(to) | Export::Triples(to) => to.json,
            Export::Graph(to) => to.json,
        }
    }
}

#[derive(Subcommand)]
enum Export {
    /// The index's passages as JSONL (`id`, `title`, `text`, `doc`, `meta`): a corpus
    /// `hoprag index` or `hoprag sync` reads back to the same index.
    Documents(ExportTo),
    /// The graph's triples as JSONL (`passage`, `doc`, `subject`, `predicate`,
    /// `object`), in passage order.
    Triples(ExportTo),
    /// The entity graph for graph tools (Gephi, Cytoscape, networkx): entity and passage
    /// nodes; fact, synonym and passage-entity edges (docs/export.md).
    Graph(GraphExportTo),
}

#[derive(Args)]
struct GraphExportTo {
    /// The index: a folder, or a PostgreSQL URL (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// The format (the schema of each: docs/export.md).
    #[arg(long, value_enum)]
    format: GraphFormat,
    /// The file to write (graphml, jsonl; `-`: standard output), or the folder of the CSV
    /// files (created if missing).
    #[arg(long, value_name = "PATH")]
    out: PathBuf,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GraphFormat {
    /// One GraphML file: nodes and edges with a `kind` attribute.
    Graphml,
    /// One JSON object a line, nodes then edges, each with `type` and `kind`.
    Jsonl,
    /// One file per node kind and per edge kind, in the folder --out.
    Csv,
}

/// What every export reads and where it writes.
#[derive(Args)]
struct ExportTo {
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    #[command(flatten)]
    namespace: super::NamespaceArg,
    /// The JSONL file to write (`-`: standard output).
    #[arg(long, value_name = "FILE.jsonl")]
    out: PathBuf,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
}

pub fn run_add(ctx: &Context, args: AddArgs) -> anyhow::Result<()> {
    let corpus = args.corpus.load(ctx)?;
    let source = format!("add {}", args.corpus.corpus.display());
    run(ctx, &args.target, Request::Upsert(corpus.passages.clone()), source)?;
    if !ctx.json && !corpus.report.duplicates.is_empty() {
        print_ingest(ctx, &corpus.report, corpus.passages.len());
    }
    Ok(())
}

pub fn run_delete(ctx: &Context, args: DeleteArgs) -> anyhow::Result<()> {
    let mut ids = args.ids;
    if let Some(path) = &args.from {
        let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
            Box::new(BufReader::new(std::io::stdin()))
        } else {
            Box::new(BufReader::new(std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?))
        };
        for line in reader.lines() {
            let line = line.with_context(|| format!("reading {}", path.display()))?;
            if !line.trim().is_empty() {
                ids.push(line.trim().to_string());
            }
        }
    }
    if ids.is_empty() {
        anyhow::bail!("name the documents or passages to delete: `hoprag delete --index DIR ID...` or --from FILE");
    }
    run(ctx, &args.target, Request::Delete(ids), "delete".into())
}

/// Writes a delta generation whole: its graph derived, its walk solved, its files a
/// fresh build's.
pub fn run_compact(ctx: &Context, args: CompactArgs) -> anyhow::Result<()> {
    let store = super::open_store(&args.index, &args.namespace, Open::Existing)?;
    let manifest = store
        .manifest()?
        .ok_or_else(|| anyhow::anyhow!("{}: no index here; build one with `hoprag index`", store.location()))?;
    let config = ctx.config_for(store.as_ref(), &[])?;
    let embedders = Embedders::for_manifest(&manifest, &config.embedder)?;
    let done = hoprag::store::edit::compact(store.as_ref(), &embedders, &ctx.progress)
        .with_context(|| format!("compacting the index in {}", store.location()))?;
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"index": store.location(), "report": done}))?);
    } else {
        match &done.generation {
            Some(g) => println!(
                "index {}: generation {g} written whole in {:.2}s ({} passages removed and {} added since the last \
                 whole one; graph and its walk {:.2}s, write {:.2}s)",
                store.location(),
                done.total_secs,
                done.removed,
                done.added,
                done.graph_secs,
                done.write_secs
            ),
            None => println!("index {}: the live generation is whole already; nothing to do", store.location()),
        }
    }
    Ok(())
}

pub fn run_sync(ctx: &Context, args: SyncArgs) -> anyhow::Result<()> {
    let corpus = args.corpus.load(ctx)?;
    let source = format!("sync {}", args.corpus.corpus.display());
    run(ctx, &args.target, Request::Sync { passages: corpus.passages, allow_empty: args.allow_empty }, source)
}

pub fn run_export(ctx: &Context, args: ExportArgs) -> anyhow::Result<()> {
    let ExportTo { index, namespace, out, .. } = match args.what {
        Export::Documents(to) => to,
        Export::Triples(to) => return export_triples(ctx, &to),
        Export::Graph(to) => return export_graph(ctx, &to),
    };
    let store = super::open_store(&index, &namespace, Open::Existing)?;
    let index = store.load()?;
    let mut bytes = Vec::new();
    for p in index.passages() {
        serde_json::to_writer(&mut bytes, p)?;
        bytes.push(b'\n');
    }
    write_out(&out, &bytes)?;
    let documents = index.passages().iter().map(|p| p.document()).collect::<std::collections::HashSet<_>>().len();
    if ctx.json {
        let summary =
            serde_json::json!({"index": store.location(), "out": out, "passages": index.len(), "documents": documents});
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else if out.as_os_str() != "-" {
        eprintln!("{} passages of {documents} documents written to {}", index.len(), out.display());
    }
    Ok(())
}

fn run(ctx: &Context, target: &EditTarget, request: Request, source: String) -> anyhow::Result<()> {
    let store = super::open_store(&target.index, &target.namespace, Open::Existing)?;
    let manifest = store
        .manifest()?
        .ok_or_else(|| anyhow::anyhow!("{}: no index here; build one with `hoprag index`", store.location()))?;
    let config = ctx.config_for(store.as_ref(), &[])?;
    let embedders = Embedders::for_manifest(&manifest, &config.embedder)?;
    let options = EditOptions {
        dry_run: target.dry_run,
        walk: if target.defer_walk { WalkUpdate::Defer } else { WalkUpdate::Solve },
        source,
    };
    let report = edit(store.as_ref(), &request, &embedders, &options, &ctx.progress)
        .with_context(|| format!("editing the index in {}", store.location()))?;
    print_report(ctx, store.as_ref(), &report)
}

fn print_report(ctx: &Context, store: &dyn Store, report: &EditReport) -> anyhow::Result<()> {
    if ctx.json {
        let out = serde_json::json!({"index": store.location(), "report": report});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let c = &report.counts;
    let w = &report.work;
    let verb = if report.dry_run { "would change" } else { "changed" };
    println!(
        "index {}: {verb} {} documents ({} added, {} replaced, {} deleted; {} unchanged): {} passages added, {} removed, {} in all",
        store.location(),
        c.documents_added + c.documents_replaced + c.documents_deleted,
        c.documents_added,
        c.documents_replaced,
        c.documents_deleted,
        c.documents_unchanged,
        c.passages_added,
        c.passages_removed,
        c.passages_total,
    );
    match &report.generation {
        Some(g) => println!(
            "generation {g} in {:.2}s: {} passages embedded ({:.2}s), graph {:.2}s ({} passages extracted, {} texts \
             embedded), walk {:.2}s, lexical {:.2}s, write {:.2}s",
            w.total_secs,
            w.passages_embedded,
            w.embed_secs,
            w.graph_secs,
            w.passages_extracted,
            w.graph_texts_embedded,
            w.walk_secs,
            w.lexical_secs,
            w.write_secs
        ),
        None if !report.dry_run => println!("nothing to change; no new generation"),
        None => {}
    }
    Ok(())
}

fn export_triples(ctx: &Context, to: &ExportTo) -> anyhow::Result<()> {
    let (out, store) = (&to.out, super::open_store(&to.index, &to.namespace, Open::Existing)?);
    let index = store.load()?;
    let graph = hoprag::store::load_graph_of(store.as_ref(), &index, &ctx.config.embedder)?.ok_or_else(|| {
        anyhow::anyhow!("{}: the index has no graph; build one with `hoprag graph`", store.location())
    })?;
    let mut bytes = Vec::new();
    for t in &graph.triples {
        let p = &index.passages()[t.passage as usize];
        let row = serde_json::json!({"passage": p.id, "doc": p.document(), "subject": t.subject,
            "predicate": t.predicate, "object": t.object});
        serde_json::to_writer(&mut bytes, &row)?;
        bytes.push(b'\n');
    }
    write_out(out, &bytes)?;
    if ctx.json {
        let summary = serde_json::json!({"index": store.location(), "out": out, "triples": graph.triples.len()});
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else if out.as_os_str() != "-" {
        eprintln!("{} triples written to {}", graph.triples.len(), out.display());
    }
    Ok(())
}

fn export_graph(ctx: &Context, to: &GraphExportTo) -> anyhow::Result<()> {
    use hoprag::graph::export::{export, Format};
    let store = super::open_store(&to.index, &to.namespace, Open::Existing)?;
    let index = store.load()?;
    let graph = hoprag::store::load_graph_of(store.as_ref(), &index, &ctx.config.embedder)?.ok_or_else(|| {
        anyhow::anyhow!("{}: the index has no graph; build one with `hoprag graph`", store.location())
    })?;
    let format = match to.format {
        GraphFormat::Graphml => Format::GraphMl,
        GraphFormat::Jsonl => Format::Jsonl,
        GraphFormat::Csv if to.out.as_os_str() == "-" => {
            anyhow::bail!("--format csv writes a folder: name it with --out")
        }
        GraphFormat::Csv => Format::Csv,
    };
    let counts = export(&graph, index.passages().as_slice(), format, &to.out)
        .with_context(|| format!("exporting the graph of {}", store.location()))?;
    if ctx.json {
        let summary = serde_json::json!({"index": store.location(), "out": to.out, "nodes": counts.nodes(),
            "edges": counts.edges(), "counts": counts, "graph": graph.stats});
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else if to.out.as_os_str() != "-" {
        eprintln!(
            "{} nodes ({} entities, {} passages) and {} edges ({} facts, {} synonym links, {} passage-entity links) \
             written to {}; {} facts have no two distinct entities and no edge",
            counts.nodes(),
            counts.entity_nodes,
            counts.passage_nodes,
            counts.edges(),
            counts.fact_edges,
            counts.synonym_edges,
            counts.passage_entity_edges,
            to.out.display(),
            counts.facts_without_edge
        );
    }
    Ok(())
}

/// Writes `bytes` to `out` (`-`: standard output), beside the target and renamed over
/// it: never a half-written file.
fn write_out(out: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut output = hoprag::files::Output::create(out)?;
    output.writer().write_all(bytes).with_context(|| format!("writing {}", out.display()))?;
    output.commit()?;
    Ok(())
}
