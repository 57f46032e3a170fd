pub mod config;
pub mod edit;
pub mod embed;
pub mod eval;
pub mod graph;
pub mod index;
pub mod mcp;
pub mod models;
pub mod namespaces;
pub mod query;
pub mod serve;
pub mod train_router;
pub mod tune;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hoprag::store::{Namespace, Open, Store};
use hoprag::Config;

use crate::progress::Bars;
use crate::settings::{Layers, Settings};

/// What every command gets from the global flags.
pub struct Context {
    pub json: bool,
    pub progress: Bars,
    /// The configuration of commands without an index (defaults, `--config`, the
    /// environment, the flags); commands on an index use [`Context::config_for`].
    pub config: Config,
    layers: Layers,
}

impl Context {
    pub fn new(
        json: bool,
        quiet: bool,
        model_dir: Option<PathBuf>,
        config_file: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        let layers = Layers { config_file, model_dir };
        let config = layers.resolve(None, &[])?.config;
        let visible = !quiet && !json && std::io::stderr().is_terminal();
        Ok(Context { json, progress: Bars::new(visible), config, layers })
    }

    /// Every setting of a command on the index in `index`: its `hoprag.toml` (or
    /// `--config`), the environment, the flags and `--set` (`serve.*` included).
    pub fn settings(&self, index: Option<&Path>, set: &[String]) -> anyhow::Result<Settings> {
        self.layers.resolve(index, set)
    }

    /// The engine configuration of a command on the index in `store`, with `--set`.
    pub fn config_for(&self, store: &dyn Store, set: &[String]) -> anyhow::Result<Config> {
        if let Some(s) = set.iter().find(|s| s.trim_start().starts_with("serve.")) {
            anyhow::bail!("--set {s:?}: serve.* settings apply to `hoprag serve` only");
        }
        Ok(self.settings(store.folder(), set)?.config)
    }

    /// What `hoprag bench` gets of the global flags.
    pub fn bench(&self) -> hoprag_bench::Context<'_> {
        hoprag_bench::Context { json: self.json, config: &self.config, progress: &self.progress }
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
    use hoprag::retrieve::registry::{GraphUse, METHODS};
    let needs = |m: &hoprag::retrieve::MethodSpec| {
        let graph = m.graph == GraphUse::Required;
        let llm = m.always_uses_llm();
        match (graph, llm) {
            (true, true) => " (needs a graph and an LLM)",
            (true, false) => " (needs a graph)",
            (false, true) => " (needs an LLM)",
            (false, false) => "",
        }
    };
    if ctx.json {
        let list: Vec<_> = METHODS
            .iter()
            .map(|m| {
                serde_json::json!({"name": m.name, "description": m.summary, "graph": m.graph,
                                        "llm": m.always_uses_llm()})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        for m in METHODS {
            println!("{:<13} {}{}", m.name, m.summary, needs(m));
        }
    }
    Ok(())
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

/// One half of `hoprag tune`'s split of a question file (by MD5 of the question id), so
/// that settings chosen or models trained on one half are reported on the other.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitHalf {
    Tune,
    Test,
}

impl SplitHalf {
    /// Keeps this half's questions and says how many.
    pub fn retain(self, ctx: &Context, questions: &mut Vec<hoprag::dataset::Question>, tune_share: f64) {
        let before = questions.len();
        questions.retain(|q| hoprag::eval::tune::in_tune_split(&q.id, tune_share) == (self == SplitHalf::Tune));
        ctx.note(format!("--split {}: {} of {before} questions", self.name(), questions.len()));
    }

    pub fn name(self) -> &'static str {
        match self {
            SplitHalf::Tune => "tune",
            SplitHalf::Test => "test",
        }
    }
}

/// `--namespace`: which of a store's indexes a command works on.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct NamespaceArg {
    /// The namespace of the store to work on (letters, digits, '-', '_', '.'; 1-64
    /// characters). Default: the store's own index.
    #[arg(long, env = "HOPRAG_NAMESPACE", value_name = "NAME", value_parser = parse_namespace)]
    pub namespace: Option<Namespace>,
}

impl NamespaceArg {
    pub fn get(&self) -> Namespace {
        self.namespace.clone().unwrap_or_default()
    }
}

fn parse_namespace(name: &str) -> Result<Namespace, String> {
    Namespace::new(name).map_err(|e| e.to_string().trim_start_matches("configuration: ").to_string())
}

/// Namespace `namespace` of the store an `--index`/`--store`/`--out` value names (a
/// folder or a PostgreSQL URL). A reader's namespace must exist ([`Open::Existing`]);
/// a builder's is made by its first write.
pub fn open_store(spec: &Path, namespace: &NamespaceArg, mode: Open) -> anyhow::Result<Arc<dyn Store>> {
    Ok(hoprag::store::open_in(&spec.to_string_lossy(), &namespace.get(), mode)?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn method_lists_split_outside_brackets_only() {
        let v = vec!["one,two[router=oracle,alpha=0.5]".to_string(), "three".to_string()];
        assert_eq!(super::split_methods(&v), ["one", "two[router=oracle,alpha=0.5]", "three"]);
    }
}
