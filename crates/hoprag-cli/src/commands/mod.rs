pub mod eval;
pub mod graph;
pub mod index;
pub mod models;
pub mod query;
pub mod train_router;
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

/// Method specs from repeated or comma-separated `--method` values; commas inside
/// `name[param=value,...]` belong to the spec.
pub fn split_methods(values: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for value in values {
        let (mut depth, mut start) = (0i32, 0);
        for (i, c) in value.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(value[start..i].trim().to_string());
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(value[start..].trim().to_string());
    }
    out.retain(|m| !m.is_empty());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn method_lists_split_outside_brackets_only() {
        let v = vec!["dense,regime_router[router=oracle,alpha=0.5]".to_string(), "bm25".to_string()];
        assert_eq!(super::split_methods(&v), ["dense", "regime_router[router=oracle,alpha=0.5]", "bm25"]);
    }
}
