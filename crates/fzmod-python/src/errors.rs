//! fzmod errors as Python exceptions. The exception classes live in `fzmod/errors.py` (so they
//! can also derive from `ValueError` / `RuntimeError`); this file only picks the class, from
//! the library's `ErrorKind` (the same kind whatever the caller was doing: a wrong `out`
//! while decoding is the caller's argument, not a damaged archive), and keeps the message.

use fzmod::ErrorKind;
use pyo3::prelude::*;

/// The Python exception class for an error kind.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::CorruptArchive => "CorruptArchive",
        ErrorKind::InvalidArgument => "InvalidArgument",
        ErrorKind::BackendUnavailable => "BackendUnavailable",
        ErrorKind::OutOfMemory | ErrorKind::Device => "DeviceError",
        // Io, and any kind a newer library adds: the base class still catches it.
        _ => "FzmodError",
    }
}

/// Raise `class` (a name from `fzmod.errors`) with `message`.
pub fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    match py.import("fzmod.errors").and_then(|m| m.getattr(class)).and_then(|c| c.call1((message,))) {
        Ok(exception) => PyErr::from_value(exception),
        Err(import_failed) => import_failed,
    }
}

/// Convert a library error.
pub fn from_library(py: Python<'_>, error: fzmod::Error) -> PyErr {
    raise(py, class_name(error.kind()), error.to_string())
}

/// An argument the bindings themselves refuse (dtype, shape of `out`, ...).
pub fn invalid_argument(py: Python<'_>, message: String) -> PyErr {
    raise(py, "InvalidArgument", message)
}
