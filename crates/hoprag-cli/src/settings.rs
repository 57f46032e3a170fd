//! The effective configuration of a command, in layers, each overriding the one before:
//! defaults < the TOML file (`--config PATH`, else `hoprag.toml` in the index folder) <
//! environment variables < command-line flags and `--set PATH=VALUE`.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};
use hoprag::Config;
use hoprag_serve::ServeSettings;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Read from an index folder when no `--config` is given.
pub const FILE_NAME: &str = "hoprag.toml";

/// Shown instead of a secret.
const MASK: &str = "********";

/// Everything a command can be configured with.
pub struct Settings {
    pub config: Config,
    /// The `[serve]` section (used by `hoprag serve`).
    pub serve: ServeSettings,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
}

/// The inputs that are the same for every command: the global flags.
pub struct Layers {
    /// `--config PATH`: read instead of the index's `hoprag.toml`; must exist.
    pub config_file: Option<PathBuf>,
    /// `--model-dir` (or env `HOPRAG_MINILM_DIR`).
    pub model_dir: Option<PathBuf>,
}

impl Layers {
    /// The settings of a command on the index in `index` (if it has one), with its
    /// `--set` overrides; `serve.*` paths set the `[serve]` section.
    pub fn resolve(&self, index: Option<&Path>, set: &[String]) -> anyhow::Result<Settings> {
        let file = match (&self.config_file, index) {
            (Some(path), _) => Some(path.clone()),
            (None, Some(dir)) => Some(dir.join(FILE_NAME)).filter(|p| p.is_file()),
            (None, None) => None,
        };
        let (mut config, mut serve) = match &file {
            Some(path) => read_file(path)?,
            None => (Config::default(), ServeSettings::default()),
        };

        config.embedder.openai = config.embedder.openai.with_env();
        config.llm = config.llm.with_env();
        if let Some(token) = std::env::var("HOPRAG_TOKEN").ok().filter(|t| !t.trim().is_empty()) {
            serve.token = Some(token);
        }

        if let Some(dir) = &self.model_dir {
            config.embedder.minilm_dir = Some(dir.clone());
        }
        let (mut config_set, mut serve_set) = (Vec::new(), Vec::new());
        for s in set {
            let (path, value) = s.split_once('=').ok_or_else(|| anyhow!("--set {s:?}: expected PATH=VALUE"))?;
            let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
            let path = path.trim().to_string();
            if path.starts_with("serve.") {
                serve_set.push((path, value));
            } else {
                config_set.push((path, value));
            }
        }
        let config = hoprag::config::with_settings(&config, &config_set)?;
        // Set under a `serve` root so that errors name the full path; the token is not
        // serialised, so it is carried over.
        let token = serve.token.take();
        let mut serve = hoprag::config::set_paths(&ServeSection { serve }, &serve_set)?.serve;
        serve.token = token;
        Ok(Settings { config, serve, file })
    }
}

/// The `[serve]` table of a file, alone.
#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct ServeSection {
    serve: ServeSettings,
}

/// Secrets are never serialised, so they cannot be set by path like the rest: the file's
/// are taken out of it and set directly.
const SECRETS: [&str; 3] = ["llm.api_key", "embedder.openai.api_key", "serve.token"];

/// Reads a configuration file: method sections as in [`Config`], plus `[serve]`.
///
/// Every value in the file is applied by its dotted path onto the defaults, as `--set`
/// does, so a partial table (`[phasegraph.fusion]` with only `alpha`) keeps the papers'
/// defaults for the rest. Every key must be one hoprag knows: a typo is an error naming
/// the key and the file, never a silently ignored setting.
pub fn read_file(path: &Path) -> anyhow::Result<(Config, ServeSettings)> {
    let at = |e: &dyn std::fmt::Display| anyhow!("{}: {e}", path.display());
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the configuration {}", path.display()))?;
    let table: toml::Table = text.parse().map_err(|e| at(&e))?;
    let mut file = serde_json::to_value(&table)?;
    let mut secrets = Vec::new();
    for secret in SECRETS {
        let (parent, key) = secret.rsplit_once('.').expect("dotted");
        let section = parent.split('.').try_fold(&mut file, |v, k| v.get_mut(k));
        if let Some(value) = section.and_then(Value::as_object_mut).and_then(|m| m.remove(key)) {
            let value = value.as_str().ok_or_else(|| at(&format!("{secret} must be a string")))?.to_string();
            secrets.push((secret, value));
        }
    }

    let (mut leaves, mut unknown) = (Vec::new(), Vec::new());
    flatten(&file, &all_defaults(), "", &mut leaves, &mut unknown);
    if let Some(first) = unknown.first() {
        let keys = if unknown.len() > 1 { "keys" } else { "key" };
        return Err(at(&format!("unknown {keys} {}; {}", unknown.join(", "), known_keys_hint(first))));
    }
    let (serve_set, config_set): (Vec<_>, Vec<_>) = leaves.into_iter().partition(|(p, _)| p.starts_with("serve."));
    let mut config = hoprag::config::with_settings(&Config::default(), &config_set).map_err(|e| at(&e))?;
    let mut serve = hoprag::config::set_paths(&ServeSection::default(), &serve_set).map_err(|e| at(&e))?.serve;
    for (secret, value) in secrets {
        match secret {
            "llm.api_key" => config.llm.api_key = Some(value),
            "embedder.openai.api_key" => config.embedder.openai.api_key = Some(value),
            _ => serve.token = Some(value),
        }
    }
    Ok((config, serve))
}

/// The dotted paths of the file's values, where the defaults have the same key: a table
/// is descended into where the default is a table too, anything else is one value.
fn flatten(file: &Value, defaults: &Value, prefix: &str, leaves: &mut Vec<(String, Value)>, unknown: &mut Vec<String>) {
    let Some(map) = file.as_object() else { return };
    for (key, value) in map {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        match defaults.get(key) {
            None => unknown.push(path),
            Some(d) if d.is_object() && value.is_object() => flatten(value, d, &path, leaves, unknown),
            Some(_) => leaves.push((path, value.clone())),
        }
    }
}

/// Every key hoprag knows, with its default: the engine's sections and `serve`.
fn all_defaults() -> Value {
    let mut all: Value =
        serde_json::from_str(&serde_json::to_string(&Config::default()).unwrap_or_default()).unwrap_or_default();
    if let Value::Object(map) = &mut all {
        map.insert("serve".into(), serde_json::to_value(ServeSettings::default()).unwrap_or_default());
    }
    all
}

/// The keys the section of `key` accepts, to point at the typo.
fn known_keys_hint(key: &str) -> String {
    let all = all_defaults();
    let (section, keys) = match key.rsplit_once('.') {
        Some((parent, _)) => (format!("[{parent}]"), parent.split('.').try_fold(&all, |v, k| v.get(k))),
        None => ("the top level".to_string(), Some(&all)),
    };
    match keys.and_then(Value::as_object) {
        Some(map) => format!("{section} takes: {}", map.keys().cloned().collect::<Vec<_>>().join(", ")),
        None => "`hoprag config` prints every key".to_string(),
    }
}

impl Settings {
    /// The whole configuration as JSON, with secrets that are set shown as a mask (they
    /// are never serialised otherwise) and unset ones left out.
    pub fn masked_json(&self) -> anyhow::Result<Value> {
        // Through JSON text: `to_value` would widen f32 parameters (0.85 → 0.8500000238).
        let mut v: Value = serde_json::from_str(&serde_json::to_string(&self.config)?)?;
        let mut serve = serde_json::to_value(&self.serve)?;
        let mask = |obj: &mut Value, key: &str, secret: &Option<String>| {
            if let (Some(map), Some(_)) = (obj.as_object_mut(), secret) {
                map.insert(key.to_string(), Value::String(MASK.into()));
            }
        };
        mask(&mut v["llm"], "api_key", &self.config.llm.api_key);
        mask(&mut v["embedder"]["openai"], "api_key", &self.config.embedder.openai.api_key);
        mask(&mut serve, "token", &self.serve.token);
        if let Value::Object(map) = &mut v {
            map.insert("serve".into(), serve);
        }
        Ok(v)
    }

    /// The same as TOML, ready to be saved as `hoprag.toml` (unset values left out).
    pub fn masked_toml(&self) -> anyhow::Result<String> {
        let mut v = self.masked_json()?;
        drop_nulls(&mut v);
        Ok(toml::to_string_pretty(&v)?)
    }
}

fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, x| !x.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_file_sets_method_parameters_and_serve_limits() {
        let (_dir, path) = write(
            "[hybrid]\nrrf_k = 30.0\n\n[phasegraph.fusion]\nalpha = 0.5\n\n[llm]\nmodel = \"m\"\napi_key = \"sk-file\"\n\n\
             [serve]\nmax_k = 7\ntoken = \"t0\"\n",
        );
        let (config, serve) = read_file(&path).unwrap();
        assert_eq!(config.methods.hybrid.rrf_k, 30.0);
        assert_eq!(config.methods.hybrid.depth, 100, "unset keys keep their defaults");
        assert_eq!(config.methods.phasegraph.fusion.alpha, 0.5);
        let paper = Config::default().methods.phasegraph.fusion;
        assert_eq!(
            config.methods.phasegraph.fusion.normalization, paper.normalization,
            "a partial table keeps the rest"
        );
        assert_eq!(config.llm.api_key.as_deref(), Some("sk-file"));
        assert_eq!((serve.max_k, serve.token.as_deref()), (7, Some("t0")));
        assert_eq!(serve.max_batch, ServeSettings::default().max_batch);
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key_and_the_file() {
        let (_dir, path) = write("[hybrid]\nrrf = 30\n\n[serve]\nmax_kk = 3\n\n[nonsense]\nx = 1\n");
        let e = read_file(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("hybrid.rrf") && e.contains("serve.max_kk") && e.contains("nonsense"), "{e}");
        assert!(e.contains("rrf_k"), "the section's keys are listed: {e}");

        let (_dir, path) = write("[hybrid]\nrrf_k = \"sixty\"\n");
        let e = read_file(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()) && e.contains("hybrid.rrf_k"), "{e}");
        let (_dir, path) = write("[hybrid\nrrf_k = 1\n");
        let e = read_file(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()) && e.contains("line 1"), "syntax errors have a line: {e}");
    }

    #[test]
    fn set_overrides_the_file_and_reaches_serve() {
        let (dir, path) = write("[hybrid]\nrrf_k = 30.0\n[serve]\nmax_k = 7\n");
        let layers = Layers { config_file: None, model_dir: Some(PathBuf::from("/models")) };
        let s = layers.resolve(Some(dir.path()), &["hybrid.rrf_k=10".into(), "serve.max_batch=3".into()]).unwrap();
        assert_eq!(s.file.as_deref(), Some(path.as_path()));
        assert_eq!((s.config.methods.hybrid.rrf_k, s.serve.max_k, s.serve.max_batch), (10.0, 7, 3));
        assert_eq!(s.config.embedder.minilm_dir.as_deref(), Some(Path::new("/models")));
        let e = layers.resolve(Some(dir.path()), &["serve.nope=1".into()]).err().unwrap().to_string();
        assert!(e.contains("serve.nope"), "{e}");
        let other = Layers { config_file: Some(dir.path().join("missing.toml")), model_dir: None };
        assert!(other.resolve(Some(dir.path()), &[]).is_err(), "an explicit --config must exist");
    }

    #[test]
    fn printing_masks_secrets_and_round_trips() {
        let (_dir, path) = write("[llm]\nmodel = \"m\"\napi_key = \"sk-secret\"\n[serve]\ntoken = \"tok-secret\"\n");
        let (config, serve) = read_file(&path).unwrap();
        let s = Settings { config, serve, file: Some(path) };
        let toml_text = s.masked_toml().unwrap();
        let json_text = s.masked_json().unwrap().to_string();
        for text in [&toml_text, &json_text] {
            assert!(!text.contains("sk-secret") && !text.contains("tok-secret"), "{text}");
            assert!(text.contains(MASK), "{text}");
        }
        // What `hoprag config` prints is a valid file again (with the masks as values).
        let (_dir2, again) = write(&toml_text);
        let (config, serve) = read_file(&again).unwrap();
        assert_eq!(config.llm.model, "m");
        assert_eq!(serve.token.as_deref(), Some(MASK));
        assert!(toml_text.contains("synonym_threshold = 0.8\n"), "f32 printed as written: {toml_text}");
    }
}
