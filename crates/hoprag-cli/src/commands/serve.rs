use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use hoprag_serve::{shutdown_signal, Server};

use super::Context;

#[derive(Args)]
pub struct ServeArgs {
    /// The index: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`
    /// (`--store` is the same flag).
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    /// A tokens file (TOML; each token's SHA-256 and the namespaces it may read and
    /// write): see `hoprag token new`. Default `serve.tokens_file`, or `tokens.toml` in
    /// the index folder.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// Address to listen on (default `serve.addr`, 127.0.0.1:8080); port 0 picks a free one.
    #[arg(long, value_name = "HOST:PORT")]
    addr: Option<String>,
    /// Bearer token required on every route but /health. Prefer env HOPRAG_TOKEN or
    /// `serve.token` in hoprag.toml: a flag is visible to other users in `ps`.
    #[arg(long)]
    token: Option<String>,
    /// Questions with gold passages (any format `hoprag eval --dataset` reads) for the
    /// web page at `/`: pick a question by id, see its gold marked, run evaluations.
    #[arg(long, value_name = "FILE")]
    dataset: Option<PathBuf>,
    /// Override a setting, e.g. `serve.max_k=50` or `hybrid.rrf_k=30` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
}

pub fn run(ctx: &Context, args: ServeArgs) -> anyhow::Result<()> {
    let spec = args.index.to_string_lossy().to_string();
    let store = super::open_store(&args.index, &Default::default(), hoprag::store::Open::Existing)?;
    let mut settings = ctx.settings(store.folder(), &args.settings)?;
    if let Some(file) = args.tokens {
        settings.serve.tokens_file = Some(file);
    }
    if settings.serve.tokens_file.is_none() {
        settings.serve.tokens_file = hoprag_serve::auth::default_file(store.folder());
    }
    if let Some(addr) = args.addr {
        settings.serve.addr = addr;
    }
    if let Some(token) = args.token {
        settings.serve.token = Some(token);
    }
    if let Some(file) = &settings.file {
        ctx.note(format!("configuration: {}", file.display()));
    }
    let namespaces = hoprag::store::namespaces(&spec)?;
    if namespaces.is_empty() {
        ctx.note(format!(
            "{}: no index yet in any namespace; build one with `hoprag index --out {} [--namespace NAME]`",
            store.location(),
            args.index.display()
        ));
    }
    let mut server = Server::open(&spec, settings.config, settings.serve)?;
    if let Some(path) = &args.dataset {
        server = server.with_dataset(path).with_context(|| format!("--dataset {}", path.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let addr = server.settings().addr.clone();
        let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("listening on {addr}"))?;
        let bound = listener.local_addr()?;
        // On stdout, first and flushed: scripts (and the tests) read the port from it.
        println!("listening on http://{bound}");
        std::io::stdout().flush()?;
        let auth =
            match (&server.settings().tokens_file, server.settings().token.as_deref().is_some_and(|t| !t.is_empty())) {
                (Some(file), _) => format!("tokens of {}", file.display()),
                (None, true) => "bearer token required".into(),
                (None, false) => "no token".into(),
            };
        let names: Vec<String> = namespaces.iter().map(ToString::to_string).collect();
        ctx.note(format!(
            "serving {} (namespaces: {}), {auth}; Ctrl-C or SIGTERM stops",
            store.location(),
            if names.is_empty() { "none yet".into() } else { names.join(", ") }
        ));
        server.run(listener, shutdown_signal()).await?;
        ctx.note("stopped");
        anyhow::Ok(())
    })
}
