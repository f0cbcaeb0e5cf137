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

use arrays::HostArray;
use errors::{from_library, invalid_argument, During};
use fzmod::backend::{Backend, BackendChoice};
use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

fn backend(py: Python<'_>, choice: &str, during: During) -> PyResult<(Backend, String)> {
    let choice = match choice {
        "auto" => BackendChoice::Auto,
        "cpu" => BackendChoice::Cpu,
        "cuda" => BackendChoice::Cuda,
        other => return Err(invalid_argument(py, format!("unknown backend '{other}' (expected auto, cpu or cuda)"))),
    };
    Backend::select(choice).map_err(|e| from_library(py, e, during))
}

/// Compress a float32/float64 numpy array into archive bytes.
#[pyfunction]
#[pyo3(signature = (array, preset, pipeline, mode, bound, backend_choice))]
fn compress<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    preset: &str,
    pipeline: Option<&str>,
    mode: Option<&str>,
    bound: Option<f64>,
    backend_choice: &str,
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
    let request = pipeline::PipelineRequest { preset, toml: pipeline, mode, bound };
    let (backend, _) = backend(py, backend_choice, During::Compress)?;
    let compressor = compressors::get(py, &request, dtype, &shape, &backend)?;
    let archive = match &input {
        HostArray::F32(a) => arrays::compress(py, a, &compressor)?,
        HostArray::F64(a) => arrays::compress(py, a, &compressor)?,
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
    let (backend, _) = backend(py, backend_choice, During::Decompress)?;
    match out {
        Some(out) => {
            // The header first, to check `out` before anything is written into it.
            let header = fzmod::inspect(bytes).map_err(|e| from_library(py, e, During::Decompress))?;
            let shape = header::shape(py, &header)?;
            let decoder = compressors::decoder(py, &backend)?;
            arrays::decode_into(&out, bytes, &header, &shape, &decoder)?;
            Ok(out)
        }
        None => {
            let decoded = py
                .detach(|| fzmod::decompress_on(&backend, bytes))
                .map_err(|e| from_library(py, e, During::Decompress))?;
            let shape = header::shape(py, &decoded.header)?;
            arrays::to_numpy(py, decoded.data, &shape)
        }
    }
}

/// The archive's header as a dict, without decoding the data.
#[pyfunction]
fn inspect<'py>(py: Python<'py>, data: PyReadonlyArray1<'py, u8>) -> PyResult<Bound<'py, PyDict>> {
    let bytes = data.as_slice().map_err(|_| invalid_argument(py, "archive bytes must be contiguous".into()))?;
    let parsed = fzmod::inspect(bytes).map_err(|e| from_library(py, e, During::Decompress))?;
    header::to_dict(py, &parsed, data.len())
}

/// `(name, summary)` of every built-in preset.
#[pyfunction]
fn presets() -> Vec<(&'static str, &'static str)> {
    fzmod::PRESETS.iter().map(|p| (p.name, p.summary)).collect()
}

/// Distortion of `decoded` against `original` (same dtype and size), as a dict.
#[pyfunction]
fn compare<'py>(
    py: Python<'py>,
    original: &Bound<'py, PyAny>,
    decoded: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let (a, b) = (arrays::host_array(original)?, arrays::host_array(decoded)?);
    let (a_shape, b_shape) = (a.shape(), b.shape());
    if a_shape != b_shape {
        return Err(invalid_argument(py, format!("cannot compare shape {a_shape:?} with shape {b_shape:?}")));
    }
    let q = fzmod::compare(&a.to_buffer(), &b.to_buffer()).map_err(|e| from_library(py, e, During::Compress))?;
    let dict = PyDict::new(py);
    dict.set_item("max_abs_error", q.max_abs_error)?;
    dict.set_item("max_error_index", q.max_error_index)?;
    dict.set_item("psnr_db", q.psnr_db)?;
    dict.set_item("nrmse", q.nrmse)?;
    dict.set_item("mse", q.mse)?;
    dict.set_item("value_min", q.value_min)?;
    dict.set_item("value_max", q.value_max)?;
    dict.set_item("value_range", q.value_range())?;
    dict.set_item("special_mismatches", q.special_mismatches)?;
    Ok(dict)
}

/// A pipeline dict (the TOML schema as Python values) as TOML text.
#[pyfunction]
fn pipeline_toml(py: Python<'_>, pipeline: &Bound<'_, PyDict>) -> PyResult<String> {
    pipeline::dict_to_toml(py, pipeline)
}

/// The backend a choice resolves to here, and why (e.g. why `auto` fell back to the CPU).
#[pyfunction]
fn resolve_backend(py: Python<'_>, choice: &str) -> PyResult<(&'static str, String)> {
    let (backend, note) = backend(py, choice, During::Compress)?;
    Ok((backend.name(), note))
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(compress, module)?)?;
    module.add_function(wrap_pyfunction!(decompress, module)?)?;
    module.add_function(wrap_pyfunction!(inspect, module)?)?;
    module.add_function(wrap_pyfunction!(presets, module)?)?;
    module.add_function(wrap_pyfunction!(compare, module)?)?;
    module.add_function(wrap_pyfunction!(pipeline_toml, module)?)?;
    module.add_function(wrap_pyfunction!(resolve_backend, module)?)?;
    module.add_function(wrap_pyfunction!(device::compress_device, module)?)?;
    module.add_function(wrap_pyfunction!(device::decompress_device, module)?)?;
    module.add_class::<device::DeviceArray>()?;
    Ok(())
}
