use std::path::PathBuf;

use clap::Args;

use super::Context;

#[derive(Args)]
pub struct ConfigArgs {
    /// Index directory whose `hoprag.toml` is read (unless `--config` names a file).
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    /// Override a setting, e.g. `hybrid.rrf_k=30` or `serve.max_k=20` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    settings: Vec<String>,
    /// Print JSON instead of TOML.
    #[arg(long)]
    pub json: bool,
}

/// Prints the effective configuration, secrets masked: the TOML form can be saved as a
/// `hoprag.toml` to start from.
pub fn run(ctx: &Context, args: ConfigArgs) -> anyhow::Result<()> {
    let settings = ctx.settings(args.index.as_deref(), &args.settings)?;
    let source = match &settings.file {
        Some(path) => path.display().to_string(),
        None => "none (defaults, environment, flags)".to_string(),
    };
    if ctx.json {
        let out = serde_json::json!({"file": settings.file, "config": settings.masked_json()?});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("# effective configuration; file: {source}\n# precedence: defaults < file < environment < flags and --set\n");
        print!("{}", settings.masked_toml()?);
    }
    Ok(())
}
