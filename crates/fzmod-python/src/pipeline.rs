//! Which pipeline to run: a preset, or a TOML pipeline given as text or as a Python dict
//! (converted here with the `toml` crate, so quoting and nesting follow the TOML spec).

use crate::errors::{from_library, invalid_argument};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// What the caller asked for, as received from Python.
pub struct PipelineRequest<'a> {
    pub preset: &'a str,
    pub toml: Option<&'a str>,
    pub mode: Option<&'a str>,
    pub bound: Option<f64>,
    /// A Mask stage in front of the pipeline (empty: none).
    pub mask: fzmod::MaskSpec,
}

/// The pipeline a request names, before any bound is applied, and the bound it resolves to
/// under the library's one policy (`ErrorBound::from_parts`: a bare value is relative, a bare
/// mode must match the pipeline's own bound). `None`: the pipeline has no bound (lossless).
pub fn resolve(
    py: Python<'_>,
    request: &PipelineRequest<'_>,
    shape: &[usize],
) -> PyResult<(fzmod::Pipeline, Option<fzmod::ErrorBound>)> {
    let lib = |e| from_library(py, e);
    let pipeline = match request.toml {
        Some(text) => fzmod::from_toml(text).map_err(lib)?,
        None => fzmod::preset(request.preset, shape).map_err(lib)?,
    };
    let pipeline =
        if request.mask.is_empty() { pipeline } else { fzmod::with_mask(&pipeline, request.mask).map_err(lib)? };
    let mode = request.mode.map(str::parse::<fzmod::ErrorMode>).transpose().map_err(lib)?;
    let bound = fzmod::ErrorBound::from_parts(mode, request.bound, pipeline.error_bound()).map_err(lib)?;
    Ok((pipeline, bound))
}

/// Build the pipeline for an input of `dtype` and `shape`, at the bound [`resolve`] gives.
pub fn build(
    py: Python<'_>,
    request: &PipelineRequest<'_>,
    dtype: fzmod::DType,
    shape: &[usize],
) -> PyResult<fzmod::Pipeline> {
    let lib = |e| from_library(py, e);
    let (mut pipeline, bound) = resolve(py, request, shape)?;
    pipeline.set_input_dtype(dtype).map_err(lib)?;
    if let Some(bound) = bound {
        pipeline.set_error_bound(bound).map_err(lib)?;
    }
    Ok(pipeline)
}

/// A Python dict in the TOML pipeline schema, as TOML text.
pub fn dict_to_toml(py: Python<'_>, dict: &Bound<'_, PyDict>) -> PyResult<String> {
    let table = table(py, dict, "pipeline")?;
    toml::to_string(&table).map_err(|e| invalid_argument(py, format!("pipeline dict is not valid TOML: {e}")))
}

fn table(py: Python<'_>, dict: &Bound<'_, PyDict>, path: &str) -> PyResult<toml::Table> {
    let mut table = toml::Table::new();
    for (key, value) in dict.iter() {
        let key: String =
            key.extract().map_err(|_| invalid_argument(py, format!("{path}: keys must be strings, got {key}")))?;
        let inner = format!("{path}.{key}");
        table.insert(key, toml_value(py, &value, &inner)?);
    }
    Ok(table)
}

fn toml_value(py: Python<'_>, value: &Bound<'_, PyAny>, path: &str) -> PyResult<toml::Value> {
    // bool before int: Python's bool is a subclass of int.
    if value.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        let v: i64 = value.extract().map_err(|_| invalid_argument(py, format!("{path}: integer out of range")))?;
        return Ok(toml::Value::Integer(v));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(value.extract()?));
    }
    if let Ok(d) = value.cast::<PyDict>() {
        return Ok(toml::Value::Table(table(py, d, path)?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items = value
            .try_iter()?
            .enumerate()
            .map(|(i, item)| toml_value(py, &item?, &format!("{path}[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(toml::Value::Array(items));
    }
    Err(invalid_argument(
        py,
        format!("{path}: {} cannot be written as TOML (use str, int, float, bool, list or dict)", value.get_type()),
    ))
}
