//! `hoprag._hoprag`: the engine as a Python extension module. The pure-Python package
//! around it (`python/hoprag`) only re-exports, documents and adapts to frameworks;
//! everything the engine does runs here, in Rust, with the GIL released.
//!
//! - [`error`]: the engine's error enum as a Python exception hierarchy;
//! - [`convert`]: Python values to and from JSON-shaped values;
//! - [`index`]: `Index` (build, open, add, retrieve, embed) and its `Result`s;
//! - [`eval`]: `evaluate`, the same report as `hoprag eval --json`;
//! - `fetch_model`: `hoprag models fetch`.

mod convert;
mod error;
mod eval;
mod index;

use pyo3::prelude::*;

/// Installs a model into the local cache (as `hoprag models fetch NAME`) and returns its
/// folder.
#[pyfunction]
fn fetch_model(py: Python<'_>, name: String) -> PyResult<std::path::PathBuf> {
    py.detach(|| hoprag::models::fetch(&name)).map_err(error::to_py)
}

/// The retrieval methods and a one-line description of each (as `hoprag methods`).
#[pyfunction]
fn methods() -> Vec<(&'static str, &'static str)> {
    hoprag::retrieve::METHODS.iter().map(|m| (m.name, m.summary)).collect()
}

#[pymodule]
fn _hoprag(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    error::register(m)?;
    m.add_class::<index::PyIndex>()?;
    m.add_class::<index::RetrievedPassage>()?;
    m.add_function(wrap_pyfunction!(eval::evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(fetch_model, m)?)?;
    m.add_function(wrap_pyfunction!(methods, m)?)?;
    Ok(())
}
