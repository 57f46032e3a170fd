//! The engine's [`hoprag::Error`] as Python exceptions: one base class, `HopragError`,
//! and a subclass per variant, carrying the engine's message (which names the file,
//! entry or field at fault).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_hoprag, HopragError, PyException, "Any error of the hoprag engine.");
create_exception!(_hoprag, InputError, HopragError, "Input that cannot be read or used: a missing file, bad JSON.");
create_exception!(
    _hoprag,
    IndexDirError,
    HopragError,
    "An index folder that is missing, damaged, or built with another embedder."
);
create_exception!(_hoprag, ModelError, HopragError, "A model that is not installed or cannot be loaded.");
create_exception!(_hoprag, EmbeddingError, HopragError, "The embedder failed.");
create_exception!(_hoprag, HttpError, HopragError, "An endpoint (LLM or embeddings) failed.");
create_exception!(_hoprag, ConfigError, HopragError, "A setting, method name or parameter that is not valid.");
create_exception!(
    _hoprag,
    UnsupportedError,
    HopragError,
    "Something hoprag does not do (yet), e.g. an index store other than a folder."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("HopragError", py.get_type::<HopragError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("IndexDirError", py.get_type::<IndexDirError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("EmbeddingError", py.get_type::<EmbeddingError>())?;
    m.add("HttpError", py.get_type::<HttpError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    Ok(())
}

/// The Python exception of an engine error, with the engine's message.
pub fn to_py(e: hoprag::Error) -> PyErr {
    use hoprag::Error as E;
    let message = e.to_string();
    match e {
        E::Io { .. } | E::Input { .. } => InputError::new_err(message),
        E::Index { .. } | E::NoNamespace { .. } => IndexDirError::new_err(message),
        E::Model(_) => ModelError::new_err(message),
        E::Embedding(_) => EmbeddingError::new_err(message),
        E::Http { .. } => HttpError::new_err(message),
        E::Config(_) | E::Filter(_) => ConfigError::new_err(message),
        E::Unsupported(_) => UnsupportedError::new_err(message),
        E::Other(_) => HopragError::new_err(message),
    }
}
