//! An archive header as a Python dict (`fzmod.inspect`).

use crate::errors::{raise, During};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The archive's array shape in `usize` (refused as corrupt when it does not fit).
pub fn shape(py: Python<'_>, header: &fzmod::Header) -> PyResult<Vec<usize>> {
    header
        .shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| raise(py, "CorruptArchive", format!("dimension {d} too large"))))
        .collect()
}

pub fn to_dict<'py>(py: Python<'py>, header: &fzmod::Header, archive_bytes: usize) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    let elements = header.num_elements().map_err(|e| crate::errors::from_library(py, e, During::Decompress))?;
    let original_bytes = elements.saturating_mul(header.dtype.size() as u64);
    dict.set_item("format_version", format!("{}.{}", header.version.0, header.version.1))?;
    // numpy's names, so `numpy.dtype(info["dtype"])` works.
    dict.set_item("dtype", header.dtype.toml_name())?;
    dict.set_item("shape", pyo3::types::PyTuple::new(py, shape(py, header)?)?)?;
    dict.set_item("error_mode", header.error_mode.name())?;
    dict.set_item("error_bound", header.error_bound)?;
    dict.set_item("abs_bound", fzmod::archived_abs_bound(header))?;
    dict.set_item("preset", &header.preset)?;
    let stages = header
        .stages
        .iter()
        .map(|s| {
            let stage = PyDict::new(py);
            stage.set_item("name", &s.name)?;
            stage.set_item("type", fzmod::stages::kind_by_id(s.type_id).map_or("unknown", |k| k.name))?;
            Ok(stage)
        })
        .collect::<PyResult<Vec<_>>>()?;
    dict.set_item("stages", stages)?;
    dict.set_item("compressed_bytes", archive_bytes)?;
    dict.set_item("original_bytes", original_bytes)?;
    dict.set_item("ratio", original_bytes as f64 / archive_bytes.max(1) as f64)?;
    Ok(dict)
}
