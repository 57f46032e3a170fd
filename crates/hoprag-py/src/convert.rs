//! Python values to and from JSON-shaped values: the engine's inputs (passages,
//! parameters) and outputs (traces, reports) are serde types, so one conversion each way
//! serves them all.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

/// A Python value (None, bool, int, float, str, list/tuple, dict with str keys) as JSON;
/// anything else is a `TypeError` naming `what`.
pub fn to_json(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    if v.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: Python's bool is an int.
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return Ok(Value::from(v.extract::<f64>()?));
    }
    if v.is_instance_of::<PyFloat>() {
        let f = v.extract::<f64>()?;
        return serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| PyTypeError::new_err(format!("{what}: {f} is not a finite number")));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, item) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err(format!("{what}: dict keys must be str, found {}", type_name(&k))))?
                .to_cow()?
                .into_owned();
            let value = to_json(&item, &format!("{what}[{key:?}]"))?;
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in v.try_iter()?.enumerate() {
            out.push(to_json(&item?, &format!("{what}[{i}]"))?);
        }
        return Ok(Value::Array(out));
    }
    Err(PyTypeError::new_err(format!("{what}: cannot use a value of type {}", type_name(v))))
}

/// A serde value as Python objects (dicts, lists, ...), through the json module: its
/// parser is the reference for what JSON means in Python.
pub fn to_py<'py, T: serde::Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| crate::error::HopragError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

pub fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}
