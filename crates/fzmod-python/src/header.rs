//! What the bindings read from an archive header.

use crate::errors::raise;
use pyo3::prelude::*;

/// The archive's array shape in `usize` (refused as corrupt when it does not fit).
pub fn shape(py: Python<'_>, header: &fzmod::Header) -> PyResult<Vec<usize>> {
    header
        .shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| raise(py, "CorruptArchive", format!("dimension {d} too large"))))
        .collect()
}
