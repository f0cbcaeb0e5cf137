//! Streaming over Python binary file objects (docs/PYTHON.md, "Streaming"): the library's
//! `compress_stream` / `decompress_stream` read and write through `read`, `seek` and `write`
//! of the objects the Python side opened or was given, taking the GIL only for those calls,
//! so memory stays one slab whatever the array's size.

use crate::errors::{from_library, invalid_argument};
use crate::pipeline::{self, PipelineRequest};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use std::io::{self, Read, Seek, SeekFrom, Write};

/// A Python binary file object as a reader, seeker and writer. The first Python exception
/// it meets is kept, to be raised as itself rather than as an I/O error's text.
struct PyFile {
    file: Py<PyAny>,
    error: Option<PyErr>,
}

impl PyFile {
    fn new(file: Py<PyAny>) -> PyFile {
        PyFile { file, error: None }
    }

    fn call<T>(&mut self, f: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<T>) -> io::Result<T> {
        Python::attach(|py| {
            f(self.file.bind(py)).map_err(|e| {
                let text = e.to_string();
                self.error.get_or_insert(e);
                io::Error::other(text)
            })
        })
    }

    /// The library's error, or the Python exception behind an I/O error.
    fn raise(&mut self, py: Python<'_>, e: fzmod::Error) -> PyErr {
        match (e.root(), self.error.take()) {
            (fzmod::Error::Io(_), Some(original)) => original,
            _ => from_library(py, e),
        }
    }
}

impl Read for PyFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got: PyBackedBytes = self.call(|f| Ok(f.call_method1("read", (buf.len(),))?.extract()?))?;
        if got.len() > buf.len() {
            return Err(io::Error::other(format!("read({}) returned {} bytes", buf.len(), got.len())));
        }
        buf[..got.len()].copy_from_slice(&got);
        Ok(got.len())
    }
}

impl Seek for PyFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let (offset, whence) = match pos {
            SeekFrom::Start(o) => (o as i64, 0),
            SeekFrom::Current(o) => (o, 1),
            SeekFrom::End(o) => (o, 2),
        };
        self.call(|f| f.call_method1("seek", (offset, whence))?.extract())
    }
}

impl Write for PyFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Raw files may write less than asked (and say how much); buffered ones return None
        // or the whole length.
        let wrote: Option<usize> = self.call(|f| f.call_method1("write", (PyBytes::new(f.py(), buf),))?.extract())?;
        Ok(wrote.unwrap_or(buf.len()).min(buf.len()))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.call(|f| f.call_method0("flush").map(drop))
    }
}

/// Compress the raw array read from the binary file object `src` (little-endian values in C
/// order of `dtype` and `shape`) into a streamed archive written to `dst`; `seekable` says
/// whether `src` can be read twice (a first pass for a `rel` bound without `value_range`).
/// Returns the archive's facts as JSON text.
#[pyfunction]
#[pyo3(signature = (src, dst, seekable, dtype, shape, preset, pipeline, mode, bound, backend_choice, mask_nan, fill_value, chunk, value_range))]
#[allow(clippy::too_many_arguments)]
pub fn compress_stream(
    py: Python<'_>,
    src: Py<PyAny>,
    dst: Py<PyAny>,
    seekable: bool,
    dtype: &str,
    shape: Vec<usize>,
    preset: &str,
    pipeline: Option<&str>,
    mode: Option<&str>,
    bound: Option<f64>,
    backend_choice: &str,
    mask_nan: bool,
    fill_value: Option<f64>,
    chunk: &str,
    value_range: Option<(f64, f64)>,
) -> PyResult<String> {
    let lib = |e| from_library(py, e);
    let dtype = fzmod::DType::parse(dtype).map_err(lib)?;
    if shape.is_empty() || shape.contains(&0) {
        return Err(invalid_argument(py, format!("shape {shape:?}: every extent must be at least 1")));
    }
    let request = PipelineRequest { preset, toml: pipeline, mode, bound, mask: crate::mask_spec(mask_nan, fill_value) };
    let p = pipeline::build(py, &request, dtype, &shape)?;
    let (backend, _) = crate::backend(py, backend_choice)?;
    let chunk_shape = fzmod::parse_chunk_shape(chunk, &shape).map_err(lib)?;
    let options = fzmod::StreamOptions {
        chunks: fzmod::ChunkOptions::shape(&chunk_shape),
        range: value_range.map(Some),
        ..Default::default()
    };
    let (mut input, mut output) = (PyFile::new(src), PyFile::new(dst));
    let result = py.detach(|| {
        let source =
            if seekable { fzmod::StreamInput::Seekable(&mut input) } else { fzmod::StreamInput::Once(&mut input) };
        fzmod::compress_stream(&p, &backend, dtype, &shape, &options, source, &mut output, &mut |_| {})
            .map(|done| (done.header, done.archive_len))
    });
    match result {
        Ok((header, len)) => crate::facts_json(py, &fzmod::ArchiveFacts::of(&header, len as usize)),
        Err(e) if output.error.is_some() => Err(output.raise(py, e)),
        Err(e) => Err(input.raise(py, e)),
    }
}

/// Decode the archive read from the binary file object `src` into `dst` (little-endian values
/// in C order): a streamed archive slab by slab, any other whole. Returns `(dtype, shape)`.
#[pyfunction]
#[pyo3(signature = (src, dst, backend_choice))]
pub fn decompress_stream(
    py: Python<'_>,
    src: Py<PyAny>,
    dst: Py<PyAny>,
    backend_choice: &str,
) -> PyResult<(&'static str, Vec<u64>)> {
    let (backend, _) = crate::backend(py, backend_choice)?;
    let (mut input, mut output) = (PyFile::new(src), PyFile::new(dst));
    let result = py.detach(|| {
        fzmod::decompress_stream(&mut input, fzmod::Decoder::new(backend), &mut output, &mut |_, _, _| {})
            .map(|(header, _)| header)
    });
    match result {
        Ok(header) => Ok((header.dtype.short_name(), header.shape)),
        Err(e) if output.error.is_some() => Err(output.raise(py, e)),
        Err(e) => Err(input.raise(py, e)),
    }
}
