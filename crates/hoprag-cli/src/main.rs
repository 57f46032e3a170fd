//! `hoprag`: the command-line interface of the hoprag multi-hop retrieval engine.

mod bench;
mod commands;
mod output;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "hoprag", version, about = "Multi-hop retrieval for retrieval-augmented generation")]
struct Cli {
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Folder with MiniLM's model files (default: the model cache; env HOPRAG_MINILM_DIR).
    #[arg(long, global = true, env = "HOPRAG_MINILM_DIR", value_name = "DIR")]
    model_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build an index from a corpus file or folder.
    Index(commands::index::IndexArgs),
    /// Add passages to an existing index without rebuilding it.
    Add(commands::index::AddArgs),
    /// Build the entity graph of an index from triples (imported or extracted).
    Graph(commands::graph::GraphArgs),
    /// Retrieve passages for a question.
    Query(commands::query::QueryArgs),
    /// Evaluate methods on a dataset with gold passages.
    Eval(commands::eval::EvalArgs),
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
    Bench(bench::BenchArgs),
}

impl Command {
    /// Whether the command prints JSON (each command has its own `--json`: eval's takes
    /// an optional output file).
    fn json(&self) -> bool {
        match self {
            Command::Index(a) => a.json,
            Command::Add(a) => a.json,
            Command::Graph(a) => a.json,
            Command::Query(a) => a.json,
            Command::Eval(a) => a.json_to_stdout(),
            Command::Tune(a) => a.json,
            Command::Models(a) => a.json,
            Command::Methods { json } => *json,
            Command::Bench(a) => a.json,
        }
    }
}

fn main() -> ExitCode {
    // candle's quantized kernels (the local LLM) split each product over their threads
    // and spin-wait for the slowest; with anything else running on the machine a second
    // thread made SmolLM2 generate 3 to 7 times slower (`hoprag bench llm`, 2 cores). One
    // thread unless the user asks for more. Set here, before any thread starts, as
    // changing the environment is only sound then.
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() && std::env::var_os("RAYON_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let ctx = commands::Context::new(cli.command.json(), cli.quiet, cli.model_dir);
    let result = match cli.command {
        Command::Index(a) => commands::index::run_index(&ctx, a),
        Command::Add(a) => commands::index::run_add(&ctx, a),
        Command::Graph(a) => commands::graph::run(&ctx, a),
        Command::Query(a) => commands::query::run(&ctx, a),
        Command::Eval(a) => commands::eval::run(&ctx, a),
        Command::Tune(a) => commands::tune::run(&ctx, a),
        Command::Models(a) => commands::models::run(&ctx, a),
        Command::Methods { .. } => commands::methods(&ctx),
        Command::Bench(a) => bench::run(&ctx, a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
