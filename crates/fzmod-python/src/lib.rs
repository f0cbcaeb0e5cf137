//! `fzmod._native`: the compiled half of the `fzmod` Python package. The public, documented
//! API is the Python package (python/fzmod/); these functions take already-normalised
//! arguments from it. Every (de)compression runs with the GIL released, so threads (Dask,
//! Zarr's thread pool) compress chunks in parallel.

mod arrays;
mod compressors;
mod device;
mod errors;
mod header;
mod host_memory;
mod pipeline;
mod streams;

use arrays::HostArray;
use errors::{from_library, invalid_argument, raise};
use fzmod::backend::{Backend, BackendChoice};
use numpy::PyReadonlyArray1;
use pipeline::PipelineRequest;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

fn backend(py: Python<'_>, choice: &str) -> PyResult<(Backend, String)> {
    let choice: BackendChoice = choice.parse().map_err(|e| from_library(py, e))?;
    Backend::select(choice).map_err(|e| from_library(py, e))
}

/// Facts under the library's shared report names, as JSON text: the Python side parses it
/// with `json.loads`, so the names and value types are exactly the CLI's.
fn facts_json(py: Python<'_>, facts: &impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(facts).map_err(|e| raise(py, "FzmodError", format!("reporting facts: {e}")))
}

/// Compress a float32/float64 numpy array into archive bytes.
#[pyfunction]
#[pyo3(signature = (array, preset, pipeline, mode, bound, backend_choice, mask_nan=false, fill_value=None, chunk=None))]
#[allow(clippy::too_many_arguments)]
fn compress<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    preset: &str,
    pipeline: Option<&str>,
    mode: Option<&str>,
    bound: Option<f64>,
    backend_choice: &str,
    mask_nan: bool,
    fill_value: Option<f64>,
    chunk: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let input = arrays::host_array(array)?;
    let shape = input.shape();
    let dtype = match &input {
        HostArray::F32(_) => fzmod::DType::F32,
        HostArray::F64(_) => fzmod::DType::F64,
    };
    if shape.is_empty() {
        return Err(invalid_argument(py, "a 0-d array has no shape to compress: reshape it to (1,)".into()));
    }
    let request = PipelineRequest { preset, toml: pipeline, mode, bound, mask: mask_spec(mask_nan, fill_value) };
    let (backend, _) = backend(py, backend_choice)?;
    let compressor = compressors::get(py, &request, dtype, &shape, &backend)?;
    let archive = match (&input, chunk) {
        (HostArray::F32(a), None) => arrays::compress(py, a, &compressor)?,
        (HostArray::F64(a), None) => arrays::compress(py, a, &compressor)?,
        (HostArray::F32(a), Some(c)) => arrays::compress_chunked(py, a, &compressor, c)?,
        (HostArray::F64(a), Some(c)) => arrays::compress_chunked(py, a, &compressor, c)?,
    };
    Ok(PyBytes::new(py, &archive))
}

/// Decode archive bytes (a uint8 array viewing them) into a new array, or into `out`.
#[pyfunction]
#[pyo3(signature = (data, out, backend_choice))]
fn decompress<'py>(
    py: Python<'py>,
    data: PyReadonlyArray1<'py, u8>,
    out: Option<Bound<'py, PyAny>>,
    backend_choice: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = data.as_slice().map_err(|_| invalid_argument(py, "archive bytes must be contiguous".into()))?;
    let (backend, _) = backend(py, backend_choice)?;
    match out {
        Some(out) => {
            // The checked plan first, to check `out` before anything is written into it.
            let decoder = fzmod::Decoder::new(backend);
            let plan = decoder.plan(bytes).map_err(|e| from_library(py, e))?;
            let shape = header::shape(py, &plan.header)?;
            arrays::decode_into(&out, plan, &shape, &decoder)?;
            Ok(out)
        }
        None => {
            let decoded = py.detach(|| fzmod::decompress_on(&backend, bytes)).map_err(|e| from_library(py, e))?;
            let shape = header::shape(py, &decoded.header)?;
            arrays::to_numpy(py, decoded.data, &shape)
        }
    }
}

/// Decode the box `region` (numpy-style slices in C order, `"10:20,0:73,5:100"`) of an
/// archive into a new array of the box's shape: of a chunked archive only the chunks the box
/// meets are decoded.
#[pyfunction]
#[pyo3(signature = (data, region, backend_choice))]
fn decompress_region<'py>(
    py: Python<'py>,
    data: PyReadonlyArray1<'py, u8>,
    region: &str,
    backend_choice: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = data.as_slice().map_err(|_| invalid_argument(py, "archive bytes must be contiguous".into()))?;
    let (backend, _) = backend(py, backend_choice)?;
    let header = fzmod::inspect(bytes).map_err(|e| from_library(py, e))?;
    let ranges = fzmod::parse_region(region, &header.shape).map_err(|e| from_library(py, e))?;
    let decoder = fzmod::Decoder::new(backend);
    let decoded = py.detach(|| decoder.region(bytes, &ranges)).map_err(|e| from_library(py, e))?;
    let shape: Vec<usize> = ranges.iter().map(|r| (r.end - r.start) as usize).collect();
    arrays::to_numpy(py, decoded.data, &shape)
}

/// The archive's facts (`fzmod::ArchiveFacts`) as JSON text, without decoding the data.
#[pyfunction]
fn inspect<'py>(py: Python<'py>, data: PyReadonlyArray1<'py, u8>) -> PyResult<String> {
    let bytes = data.as_slice().map_err(|_| invalid_argument(py, "archive bytes must be contiguous".into()))?;
    let parsed = fzmod::inspect(bytes).map_err(|e| from_library(py, e))?;
    facts_json(py, &fzmod::ArchiveFacts::of(&parsed, bytes.len()))
}

/// `(name, summary)` of every built-in preset.
#[pyfunction]
fn presets() -> Vec<(&'static str, &'static str)> {
    fzmod::PRESETS.iter().map(|p| (p.name, p.summary)).collect()
}

/// How `decoded` compares with `original` (same dtype and shape), judged against the
/// guaranteed absolute error `abs_bound` (`None`: the reconstruction must be exact), as the
/// JSON text of `fzmod::QualityFacts`.
#[pyfunction]
#[pyo3(signature = (original, decoded, abs_bound))]
fn compare<'py>(
    py: Python<'py>,
    original: &Bound<'py, PyAny>,
    decoded: &Bound<'py, PyAny>,
    abs_bound: Option<f64>,
) -> PyResult<String> {
    let (a, b) = (arrays::host_array(original)?, arrays::host_array(decoded)?);
    let (a_shape, b_shape) = (a.shape(), b.shape());
    if a_shape != b_shape {
        return Err(invalid_argument(py, format!("cannot compare shape {a_shape:?} with shape {b_shape:?}")));
    }
    let quality = fzmod::compare(&a.to_buffer(), &b.to_buffer()).map_err(|e| from_library(py, e))?;
    let verdict = fzmod::Verdict::judge(&quality, abs_bound);
    facts_json(py, &fzmod::QualityFacts::of(&quality, &verdict))
}

/// The bound `(mode, value)` that compressing with these settings runs at, or `None` for a
/// pipeline without one; raises for what `compress` would refuse (unknown preset, bad TOML,
/// a mode without a value the pipeline cannot supply, a bad backend name). Codecs call it when
/// they are built, so a wrong setting fails there and not on the first chunk.
#[pyfunction]
#[pyo3(signature = (preset, pipeline, mode, bound, backend_choice, mask_nan=false, fill_value=None))]
#[allow(clippy::too_many_arguments)]
fn resolve_settings(
    py: Python<'_>,
    preset: &str,
    pipeline: Option<&str>,
    mode: Option<&str>,
    bound: Option<f64>,
    backend_choice: &str,
    mask_nan: bool,
    fill_value: Option<f64>,
) -> PyResult<Option<(&'static str, f64)>> {
    backend_choice.parse::<BackendChoice>().map_err(|e| from_library(py, e))?;
    let request = PipelineRequest { preset, toml: pipeline, mode, bound, mask: mask_spec(mask_nan, fill_value) };
    // Presets take the shape only to pick block sizes; the bound does not depend on it.
    let (_, resolved) = pipeline::resolve(py, &request, &[1])?;
    Ok(resolved.map(|b| (b.mode.name(), b.value)))
}

/// What `mask_nan` / `fill_value` ask to mask: a fill value masks NaN too (a NaN fill value
/// is NaN masking), nothing at all means no Mask stage.
pub(crate) fn mask_spec(mask_nan: bool, fill_value: Option<f64>) -> fzmod::MaskSpec {
    match fill_value {
        Some(_) => fzmod::MaskSpec::nan_and(fill_value),
        None => fzmod::MaskSpec { nan: mask_nan, inf: false, fill: None },
    }
}

/// A pipeline dict (the TOML schema as Python values) as TOML text.
#[pyfunction]
fn pipeline_toml(py: Python<'_>, pipeline: &Bound<'_, PyDict>) -> PyResult<String> {
    pipeline::dict_to_toml(py, pipeline)
}

/// The backend a choice resolves to here, and why (e.g. why `auto` fell back to the CPU).
#[pyfunction]
fn resolve_backend(py: Python<'_>, choice: &str) -> PyResult<(&'static str, String)> {
    let (backend, note) = backend(py, choice)?;
    Ok((backend.name(), note))
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(compress, module)?)?;
    module.add_function(wrap_pyfunction!(decompress, module)?)?;
    module.add_function(wrap_pyfunction!(decompress_region, module)?)?;
    module.add_function(wrap_pyfunction!(streams::compress_stream, module)?)?;
    module.add_function(wrap_pyfunction!(streams::decompress_stream, module)?)?;
    module.add_function(wrap_pyfunction!(inspect, module)?)?;
    module.add_function(wrap_pyfunction!(presets, module)?)?;
    module.add_function(wrap_pyfunction!(resolve_settings, module)?)?;
    module.add("DEFAULT_PRESET", fzmod::DEFAULT_PRESET)?;
    module.add_function(wrap_pyfunction!(compare, module)?)?;
    module.add_function(wrap_pyfunction!(pipeline_toml, module)?)?;
    module.add_function(wrap_pyfunction!(resolve_backend, module)?)?;
    module.add_function(wrap_pyfunction!(device::compress_device, module)?)?;
    module.add_function(wrap_pyfunction!(device::decompress_device, module)?)?;
    module.add_class::<device::DeviceArray>()?;
    Ok(())
}
