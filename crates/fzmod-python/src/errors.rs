//! fzmod errors as Python exceptions. The exception classes live in `fzmod/errors.py` (so they
//! can also derive from `ValueError` / `RuntimeError`); this file only picks the class and
//! keeps the library's message.

use pyo3::prelude::*;

/// What the caller was doing: the same library error means different things to a user who
/// gave us an array (their argument is wrong) and to one who gave us archive bytes (the
/// bytes are damaged).
#[derive(Clone, Copy)]
pub enum During {
    Compress,
    Decompress,
}

/// The Python exception class for a library error.
fn class_name(error: &fzmod::Error, during: During) -> &'static str {
    use fzmod::Error as E;
    match error {
        E::BadMagic
        | E::UnsupportedVersion { .. }
        | E::Truncated(_)
        | E::Checksum { .. }
        | E::Corrupt(_)
        | E::UnknownStage(_) => "CorruptArchive",
        E::InvalidArgument(_) | E::Pipeline(_) | E::Config(_) | E::Stage { .. } => match during {
            During::Compress => "InvalidArgument",
            During::Decompress => "CorruptArchive",
        },
        E::BackendUnavailable(_) => "BackendUnavailable",
        E::OutOfMemory(_) | E::Device(_) => "DeviceError",
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
pub fn from_library(py: Python<'_>, error: fzmod::Error, during: During) -> PyErr {
    raise(py, class_name(&error, during), error.to_string())
}

/// An argument the bindings themselves refuse (dtype, shape of `out`, ...).
pub fn invalid_argument(py: Python<'_>, message: String) -> PyErr {
    raise(py, "InvalidArgument", message)
}
