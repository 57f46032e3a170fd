//! The crate's error type. Every variant names the file, entry or field at fault so a
//! user can fix their input without reading the source.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OS error is part of the message, not a `source()` as well: a reporter that
    /// prints the chain (the CLI's `{:#}`) would otherwise say it twice.
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    /// Input that cannot be used at all (as opposed to single entries, which are skipped
    /// and reported).
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error("index {path}: {message}")]
    Index { path: PathBuf, message: String },
    /// A namespace the store does not hold (see [`crate::store::Namespace`]).
    #[error("{store}: no namespace {namespace:?} here; create it with `hoprag index --namespace {namespace}`")]
    NoNamespace { store: String, namespace: String },
    /// A metadata filter that cannot be used (see [`crate::filter`]); the message names
    /// the place in the filter.
    #[error("{0}")]
    Filter(String),
    #[error("model: {0}")]
    Model(String),
    #[error("embedding: {0}")]
    Embedding(String),
    #[error("http {url}: {message}")]
    Http { url: String, message: String },
    #[error("configuration: {0}")]
    Config(String),
    /// Something this build leaves out (a cargo feature), with how to get it.
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), error: source }
    }

    pub fn input(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Input { path: path.into(), message: message.into() }
    }

    pub fn index(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Index { path: path.into(), message: message.into() }
    }
}
