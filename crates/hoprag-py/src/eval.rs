//! `evaluate`: `hoprag eval` on an opened index, returning its JSON report.

use std::path::PathBuf;

use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::eval::{evaluate_queries, EvalOptions};
use hoprag::progress::Silent;
use pyo3::prelude::*;

use crate::convert;
use crate::error::to_py;
use crate::index::PyIndex;

/// Evaluates `methods` on the questions of `dataset` (any format `hoprag eval` reads)
/// and returns the report `hoprag eval --json` writes, as a dict.
#[pyfunction]
#[pyo3(signature = (index, dataset, methods, ks, baseline = None, limit = None))]
pub fn evaluate<'py>(
    py: Python<'py>,
    index: &PyIndex,
    dataset: PathBuf,
    methods: Vec<String>,
    ks: Vec<usize>,
    baseline: Option<String>,
    limit: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let engine = index.current_engine();
    let report = py
        .detach(|| -> hoprag::Result<_> {
            let (_, mut questions) = load_dataset(&dataset)?;
            if let Some(n) = limit {
                questions.truncate(n);
            }
            let resolved = resolve_gold(&questions, engine.index.passages());
            let options = EvalOptions::new(ks, baseline, dataset.display().to_string());
            let texts: Vec<String> = resolved.questions.iter().map(|q| q.text.clone()).collect();
            let queries = engine.embed_queries(&texts, &Silent)?;
            evaluate_queries(&engine, &resolved, &queries, &methods, &options, &Silent)
        })
        .map_err(to_py)?;
    convert::to_py(py, &report)
}
