//! `evaluate`: `hoprag eval` on an opened index, returning its JSON report.

use std::path::PathBuf;

use hoprag::dataset::{load_dataset, resolve_gold};
use hoprag::eval::{evaluate_queries, simulated_judge as simulated_judge_for, simulation_note, EvalOptions};
use hoprag::progress::Silent;
use pyo3::prelude::*;

use crate::convert;
use crate::error::to_py;
use crate::index::PyIndex;

/// Evaluates `methods` on the questions of `dataset` (any format `hoprag eval` reads)
/// and returns the report `hoprag eval --json` writes, as a dict. `simulated_judge`
/// (an accuracy in [0, 1]) is `hoprag eval --set llm.simulated_judge=P`: BridgeRAG's
/// judge replaced by one that knows this evaluation's gold, said in the report's header.
#[pyfunction]
#[pyo3(signature = (index, dataset, methods, ks, baseline = None, limit = None, simulated_judge = None))]
#[allow(clippy::too_many_arguments)]
pub fn evaluate<'py>(
    py: Python<'py>,
    index: &PyIndex,
    dataset: PathBuf,
    methods: Vec<String>,
    ks: Vec<usize>,
    baseline: Option<String>,
    limit: Option<usize>,
    simulated_judge: Option<f64>,
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
            // The judge needs this evaluation's gold: the opened index's engine, with it.
            let judge = simulated_judge.map(|p| simulated_judge_for(&engine, &resolved, p)).transpose()?;
            let options =
                EvalOptions { simulated: simulation_note(&engine, judge.as_ref().map(|j| j.header())), ..options };
            let engine = match judge {
                Some(judge) => {
                    std::sync::Arc::new(engine.with_config(engine.config.clone()).with_llm(std::sync::Arc::new(judge)))
                }
                None => engine,
            };
            let texts: Vec<String> = resolved.questions.iter().map(|q| q.text.clone()).collect();
            let queries = engine.embed_queries(&texts, &Silent)?;
            evaluate_queries(&engine, &resolved, &queries, &methods, &options, &Silent)
        })
        .map_err(to_py)?;
    convert::to_py(py, &report)
}
