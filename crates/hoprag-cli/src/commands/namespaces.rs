//! `hoprag namespaces`: the indexes a store holds; `hoprag token new`: a token with
//! scopes for `hoprag serve`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use hoprag::store::Open;

use super::Context;

#[derive(Args)]
pub struct NamespacesArgs {
    /// The store: a folder, or a PostgreSQL URL `postgres://USER@HOST:PORT/DB?schema=NAME`.
    #[arg(long, alias = "store", env = "HOPRAG_STORE", value_name = "DIR|URL")]
    index: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run_namespaces(ctx: &Context, args: NamespacesArgs) -> anyhow::Result<()> {
    let spec = args.index.to_string_lossy().to_string();
    let mut rows = Vec::new();
    for namespace in hoprag::store::namespaces(&spec)? {
        let store = hoprag::store::open_in(&spec, &namespace, Open::Existing)?;
        let manifest = store.manifest()?;
        rows.push(serde_json::json!({
            "name": namespace.as_str(),
            "passages": manifest.as_ref().map(|m| m.counts.passages),
            "embedder": manifest.as_ref().map(|m| m.embedder.id.clone()),
            "graph": manifest.as_ref().is_some_and(|m| m.graph.is_some()),
            "generation": store.generation()?,
        }));
    }
    if ctx.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"store": spec, "namespaces": rows}))?);
    } else if rows.is_empty() {
        eprintln!("{spec}: no index in any namespace");
    } else {
        for r in &rows {
            println!(
                "{:<24} {:>9} passages  {}{}",
                r["name"].as_str().unwrap_or(""),
                r["passages"],
                r["embedder"].as_str().unwrap_or(""),
                if r["graph"] == true { ", graph" } else { "" }
            );
        }
    }
    Ok(())
}

#[derive(Args)]
pub struct TokenArgs {
    /// The token's name, for logs (not secret).
    #[arg(long)]
    name: String,
    /// Namespaces it may read (repeatable or comma-separated; `*`: every one).
    #[arg(long, value_delimiter = ',')]
    read: Vec<String>,
    /// Namespaces it may write to, and read (repeatable or comma-separated; `*`: every one).
    #[arg(long, value_delimiter = ',')]
    write: Vec<String>,
    /// The tokens file to append its SHA-256 to (created if missing, readable by its
    /// owner only); `hoprag serve --tokens FILE` reads it.
    #[arg(long, value_name = "FILE")]
    tokens: PathBuf,
}

/// Makes a random token, appends its digest and scopes to the tokens file, and prints
/// the token once on stdout: it is stored nowhere.
pub fn run_token_new(ctx: &Context, args: TokenArgs) -> anyhow::Result<()> {
    let (token, entry) = hoprag_serve::auth::new_token(&args.name, &args.read, &args.write)?;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&args.tokens).with_context(|| format!("opening {}", args.tokens.display()))?;
    let separator = if file.metadata()?.len() > 0 { "\n" } else { "" };
    file.write_all(format!("{separator}{entry}").as_bytes())?;
    file.sync_all()?;
    // The file must still parse, with the new token in it.
    hoprag_serve::auth::Tokens::new(None, Some(&args.tokens))?;
    println!("{token}");
    ctx.note(format!("token {:?} added to {}; this is the only time it is shown", args.name, args.tokens.display()));
    Ok(())
}
