//! `hoprag`: the command-line interface of the hoprag multi-hop retrieval engine.

mod commands;
mod progress;
mod settings;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `hoprag --version`: the version, and whether this build runs local chat models.
const VERSION: &str = if cfg!(feature = "local-llm") {
    concat!(env!("CARGO_PKG_VERSION"), " (with the local LLM runtime)")
} else {
    concat!(env!("CARGO_PKG_VERSION"), " (without the local LLM runtime: cargo feature `local-llm`)")
};

#[derive(Parser)]
#[command(name = "hoprag", version = VERSION, about = "Multi-hop retrieval for retrieval-augmented generation")]
struct Cli {
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Folder with MiniLM's model files (default: the model cache; env HOPRAG_MINILM_DIR).
    #[arg(long, global = true, env = "HOPRAG_MINILM_DIR", value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Threads for the embedder and the local LLM (default: every available core).
    #[arg(long, global = true, env = "HOPRAG_THREADS", value_name = "N")]
    threads: Option<usize>,
    /// Configuration file (TOML) to read instead of the index's `hoprag.toml`.
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build an index from a corpus file or folder.
    Index(commands::index::IndexArgs),
    /// Embed texts (stdin lines or JSONL) into JSONL or .npy vectors.
    Embed(commands::embed::EmbedArgs),
    /// Add or replace documents and passages (upsert): a row with a `doc` replaces that
    /// document's passages, one with an existing passage's id replaces it. Every method,
    /// the entity graph included, sees the change.
    Add(commands::edit::AddArgs),
    /// Delete documents (or single passages) by id.
    Delete(commands::edit::DeleteArgs),
    /// Make the index hold exactly a corpus's documents: add new ones, replace changed
    /// ones, delete missing ones, embedding only what changed.
    Sync(commands::edit::SyncArgs),
    /// Write the live generation whole where edits left it a delta on an older one: the
    /// files a fresh build of its passages writes (edits do it by themselves past 1 % of
    /// the passages).
    Compact(commands::edit::CompactArgs),
    /// Write what an index holds: `hoprag export documents --index DIR --out FILE.jsonl`.
    Export(commands::edit::ExportArgs),
    /// Build the entity graph of an index from triples (imported or extracted).
    Graph(commands::graph::GraphArgs),
    /// Retrieve passages for a question.
    Query(commands::query::QueryArgs),
    /// Serve an index over HTTP (JSON API): every namespace of the store.
    Serve(commands::serve::ServeArgs),
    /// Serve an index to an AI agent over MCP on stdin/stdout (read-only unless
    /// --allow-write): retrieve, explain, get_document, list_methods.
    Mcp(commands::mcp::McpArgs),
    /// List the namespaces of a store (the indexes it holds).
    Namespaces(commands::namespaces::NamespacesArgs),
    /// Tokens for `hoprag serve`: `hoprag token new --name N --read NS --write NS --tokens FILE`.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print the effective configuration (file, environment, flags), secrets masked.
    Config(commands::config::ConfigArgs),
    /// Retrieve passages for a question and answer it from them with the LLM.
    Answer(commands::query::QueryArgs),
    /// Evaluate methods on a dataset with gold passages.
    Eval(commands::eval::EvalArgs),
    /// Train RegimeRouter's sentence selector and router on questions with gold passages.
    TrainRouter(commands::train_router::TrainRouterArgs),
    /// Grid-search a method's parameters on a tune split, then evaluate once on test.
    Tune(commands::tune::TuneArgs),
    /// List the models hoprag knows, or install one.
    Models(commands::models::ModelsArgs),
    /// List the retrieval methods.
    Methods {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure index build and query speed on a corpus.
    Bench(hoprag_bench::BenchArgs),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Make a random token with scopes, append its SHA-256 to a tokens file and print it once.
    New(commands::namespaces::TokenArgs),
}

impl Command {
    /// Whether the command prints JSON (each command has its own `--json`: eval's takes
    /// an optional output file).
    fn json(&self) -> bool {
        match self {
            Command::Index(a) => a.json,
            Command::Add(a) => a.target.json,
            Command::Delete(a) => a.target.json,
            Command::Compact(a) => a.json,
            Command::Sync(a) => a.target.json,
            Command::Export(a) => a.json(),
            Command::Embed(_) => false,
            Command::Graph(a) => a.json,
            Command::Query(a) | Command::Answer(a) => a.json,
            Command::Serve(_) | Command::Token(_) | Command::Mcp(_) => false,
            Command::Namespaces(a) => a.json,
            Command::Config(a) => a.json,
            Command::Eval(a) => a.json_to_stdout(),
            Command::Tune(a) => a.json,
            Command::TrainRouter(a) => a.json,
            Command::Models(a) => a.json,
            Command::Methods { json } => *json,
            Command::Bench(a) => a.json,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(n) = cli.threads {
        hoprag::threads::set(n);
    }
    // The server logs one line per request unless RUST_LOG says otherwise.
    let default_log = if matches!(cli.command, Command::Serve(_)) { "warn,hoprag_serve=info" } else { "warn" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_log))
        .format_timestamp_millis()
        .init();
    let ctx = match commands::Context::new(cli.command.json(), cli.quiet, cli.model_dir, cli.config) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Index(a) => commands::index::run_index(&ctx, a),
        Command::Add(a) => commands::edit::run_add(&ctx, a),
        Command::Delete(a) => commands::edit::run_delete(&ctx, a),
        Command::Compact(a) => commands::edit::run_compact(&ctx, a),
        Command::Sync(a) => commands::edit::run_sync(&ctx, a),
        Command::Export(a) => commands::edit::run_export(&ctx, a),
        Command::Embed(a) => commands::embed::run(&ctx, a),
        Command::Graph(a) => commands::graph::run(&ctx, a),
        Command::Query(a) => commands::query::run(&ctx, a),
        Command::Serve(a) => commands::serve::run(&ctx, a),
        Command::Mcp(a) => commands::mcp::run(&ctx, a),
        Command::Namespaces(a) => commands::namespaces::run_namespaces(&ctx, a),
        Command::Token(TokenCommand::New(a)) => commands::namespaces::run_token_new(&ctx, a),
        Command::Config(a) => commands::config::run(&ctx, a),
        Command::Answer(mut a) => {
            a.answer = true;
            commands::query::run(&ctx, a)
        }
        Command::Eval(a) => commands::eval::run(&ctx, a),
        Command::Tune(a) => commands::tune::run(&ctx, a),
        Command::TrainRouter(a) => commands::train_router::run(&ctx, a),
        Command::Models(a) => commands::models::run(&ctx, a),
        Command::Methods { .. } => commands::methods(&ctx),
        Command::Bench(a) => hoprag_bench::run(&ctx.bench(), a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
