//! `hoprag mcp`: the MCP server on stdio, for a desktop or IDE agent that starts it.

use std::path::PathBuf;

use clap::Args;
use hoprag::store::Namespace;
use hoprag_serve::{LocalAccess, Server};

use super::Context;

#[derive(Args)]
pub struct McpArgs {
    /// The index: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`
    /// (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    /// Serve only this namespace (repeatable); the first is the one a tool call that names
    /// none works on. Default: every namespace of the store.
    #[arg(long = "namespace", value_name = "NAME", value_parser = namespace)]
    namespaces: Vec<Namespace>,
    /// Offer the write tools (upsert_documents, delete_documents). Without it the server
    /// only reads.
    #[arg(long)]
    allow_write: bool,
    /// Override a setting, e.g. `serve.max_k=50` or `hybrid.rrf_k=30` (repeatable); the
    /// `[serve]` limits apply to the tools as to the HTTP routes.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
}

fn namespace(name: &str) -> Result<Namespace, String> {
    Namespace::new(name).map_err(|e| e.to_string().trim_start_matches("configuration: ").to_string())
}

pub fn run(ctx: &Context, args: McpArgs) -> anyhow::Result<()> {
    let spec = args.index.to_string_lossy().to_string();
    let store = super::open_store(&args.index, &Default::default(), hoprag::store::Open::Existing)?;
    let mut settings = ctx.settings(store.folder(), &args.settings)?;
    // The caller is whoever started the process: no tokens, the command line decides.
    settings.serve.token = None;
    settings.serve.tokens_file = None;
    let held = hoprag::store::namespaces(&spec)?;
    if let Some(missing) = args.namespaces.iter().find(|n| !held.contains(n)) {
        anyhow::bail!("--namespace {missing}: no such namespace in {}", store.location());
    }
    let server = Server::open(&spec, settings.config, settings.serve)?;
    let names: Vec<String> = match args.namespaces.is_empty() {
        true => held.iter().map(ToString::to_string).collect(),
        false => args.namespaces.iter().map(ToString::to_string).collect(),
    };
    // On stderr: stdout carries the protocol.
    eprintln!(
        "hoprag mcp: serving {} (namespaces: {}), {}, on stdin/stdout",
        store.location(),
        if names.is_empty() { "none yet".into() } else { names.join(", ") },
        if args.allow_write { "read and write" } else { "read-only" }
    );
    let access = LocalAccess { namespaces: args.namespaces, write: args.allow_write };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(server.serve_mcp_stdio(access))?;
    Ok(())
}
