pub mod eval;
pub mod graph;
pub mod index;
pub mod models;
pub mod query;
pub mod tune;

use std::io::IsTerminal;
use std::path::PathBuf;

use hoprag::Config;

use crate::progress::Bars;

/// What every command gets from the global flags.
pub struct Context {
    pub json: bool,
    pub progress: Bars,
    pub config: Config,
}

impl Context {
    pub fn new(json: bool, quiet: bool, model_dir: Option<PathBuf>) -> Self {
        let mut config = Config::default();
        config.embedder.minilm_dir = model_dir;
        config.embedder.openai = config.embedder.openai.with_env();
        config.llm = config.llm.with_env();
        let visible = !quiet && !json && std::io::stderr().is_terminal();
        Context { json, progress: Bars::new(visible), config }
    }

    /// Prints a status line on stderr unless output is JSON.
    pub fn note(&self, line: impl AsRef<str>) {
        if !self.json {
            eprintln!("{}", line.as_ref());
        }
    }
}

/// Says on stderr which chat model answers, when one of `methods` asks it anything.
pub fn note_llm<'a>(ctx: &Context, engine: &hoprag::Engine, methods: impl IntoIterator<Item = &'a str>) {
    if methods.into_iter().any(|m| engine.uses_llm(m)) {
        ctx.note(format!("LLM: {}", engine.llm_source()));
    }
}

pub fn methods(ctx: &Context) -> anyhow::Result<()> {
    if ctx.json {
        let list: Vec<_> =
            hoprag::engine::METHODS.iter().map(|(n, d)| serde_json::json!({"name": n, "description": d})).collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        for (name, description) in hoprag::engine::METHODS {
            println!("{name:<10} {description}");
        }
    }
    Ok(())
}

/// Applies `--set PATH=VALUE` overrides (dotted configuration paths, e.g.
/// `phasegraph.fusion.alpha=0.5`; values are JSON, or text if they do not parse).
pub fn apply_settings(config: &Config, settings: &[String]) -> anyhow::Result<Config> {
    let mut parsed = Vec::new();
    for s in settings {
        let (path, value) = s.split_once('=').ok_or_else(|| anyhow::anyhow!("--set {s:?}: expected PATH=VALUE"))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        parsed.push((path.trim().to_string(), value));
    }
    Ok(hoprag::eval::tune::with_settings(config, &parsed)?)
}
