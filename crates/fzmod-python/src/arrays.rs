//! numpy arrays in and out of the library. A C-contiguous input is borrowed: the library reads
//! the array's own memory while the GIL is released (the `PyReadonlyArray` borrow keeps the
//! array alive and refuses writable Rust borrows meanwhile). Other layouts are gathered once
//! into C order. Decoded vectors become numpy arrays without a copy, and `out=` is filled by
//! the library (`Decoder::run_into`), not by a copy here.

use crate::errors::{from_library, invalid_argument};
use crate::host_memory::vec_for_copy;
use fzmod::graph::DecodePlan;
use fzmod::{Compressor, Decoder};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// An element type both numpy and the library know (f32, f64).
pub trait Float: numpy::Element + fzmod::Element + Copy {}
impl Float for f32 {}
impl Float for f64 {}

/// A float32 or float64 numpy array, borrowed read-only.
pub enum HostArray<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

impl HostArray<'_> {
    pub fn shape(&self) -> Vec<usize> {
        match self {
            HostArray::F32(a) => a.shape().to_vec(),
            HostArray::F64(a) => a.shape().to_vec(),
        }
    }

    /// The elements copied into a library buffer (for `fzmod::compare`, which takes owned ones).
    pub fn to_buffer(&self) -> fzmod::Buffer {
        match self {
            HostArray::F32(a) => fzmod::Buffer::F32(c_order(a, &mut Vec::new()).to_vec()),
            HostArray::F64(a) => fzmod::Buffer::F64(c_order(a, &mut Vec::new()).to_vec()),
        }
    }
}

/// Borrow an f32 or f64 numpy array (any strides); other dtypes are refused.
pub fn host_array<'py>(array: &Bound<'py, PyAny>) -> PyResult<HostArray<'py>> {
    if let Ok(a) = array.cast::<PyArrayDyn<f32>>() {
        return Ok(HostArray::F32(a.try_readonly()?));
    }
    if let Ok(a) = array.cast::<PyArrayDyn<f64>>() {
        return Ok(HostArray::F64(a.try_readonly()?));
    }
    let dtype = array.getattr("dtype").map(|d| d.to_string()).unwrap_or_else(|_| array.get_type().to_string());
    Err(invalid_argument(array.py(), format!("fzmod compresses float32 and float64 arrays, got {dtype}")))
}

/// The array's elements in C order: its own memory when C-contiguous, else a copy in `copy`.
pub fn c_order<'a, T: Float>(view: &'a PyReadonlyArrayDyn<'_, T>, copy: &'a mut Vec<T>) -> &'a [T] {
    // `as_slice` also accepts Fortran order, whose memory is not the C order the library
    // expects: only a C-contiguous array is borrowed as one block.
    if view.is_c_contiguous() {
        if let Ok(contiguous) = view.as_slice() {
            return contiguous;
        }
    }
    *copy = vec_for_copy(view.len());
    let strided = view.as_array();
    if strided.ndim() == 0 {
        copy.extend(strided.iter().copied());
        return copy;
    }
    // Row by row, so that views with contiguous rows (a Zarr chunk cut from a larger array,
    // a slice of columns) are copied with memcpy rather than element by element.
    for row in strided.rows() {
        match row.as_slice() {
            Some(contiguous) => copy.extend_from_slice(contiguous),
            None => copy.extend(row.iter().copied()),
        }
    }
    copy
}

/// Compress a numpy array (GIL released while the library works).
pub fn compress<T: Float>(
    py: Python<'_>,
    view: &PyReadonlyArrayDyn<'_, T>,
    compressor: &Compressor,
) -> PyResult<Vec<u8>> {
    let shape = view.shape().to_vec();
    let mut copy = Vec::new();
    let values = c_order(view, &mut copy);
    py.detach(|| compressor.compress(values, &shape)).map_err(|e| from_library(py, e))
}

/// [`compress`] as a chunked archive of chunks of `chunk` (`"auto"`, `"64x64"`, ...).
pub fn compress_chunked<T: Float>(
    py: Python<'_>,
    view: &PyReadonlyArrayDyn<'_, T>,
    compressor: &Compressor,
    chunk: &str,
) -> PyResult<Vec<u8>> {
    let shape = view.shape().to_vec();
    let chunk_shape = fzmod::parse_chunk_shape(chunk, &shape).map_err(|e| from_library(py, e))?;
    let options = fzmod::ChunkOptions::shape(&chunk_shape);
    let mut copy = Vec::new();
    let values = c_order(view, &mut copy);
    py.detach(|| compressor.compress_chunked(values, &shape, &options)).map_err(|e| from_library(py, e))
}

/// Hand a decoded buffer to numpy with the archive's shape (no copy).
pub fn to_numpy<'py>(py: Python<'py>, buffer: fzmod::Buffer, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    match buffer {
        fzmod::Buffer::F32(v) => owned_array(py, v, shape),
        fzmod::Buffer::F64(v) => owned_array(py, v, shape),
        other => Err(invalid_argument(
            py,
            format!("archive holds {} data; fzmod arrays are float32 or float64", other.dtype()),
        )),
    }
}

fn owned_array<'py, T: numpy::Element>(
    py: Python<'py>,
    values: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let array = ArrayD::from_shape_vec(IxDyn(shape), values)
        .map_err(|e| invalid_argument(py, format!("decoded data does not fit shape {shape:?}: {e}")))?;
    Ok(array.into_pyarray(py).into_any())
}

/// Decode `archive` (whose header is `header`) straight into the caller's array, which must
/// match it exactly: dtype, shape, C-contiguous, writable.
pub fn decode_into(out: &Bound<'_, PyAny>, plan: DecodePlan, shape: &[usize], decoder: &Decoder) -> PyResult<()> {
    match plan.header.dtype {
        fzmod::DType::F32 => decode_typed::<f32>(out, plan, shape, decoder),
        fzmod::DType::F64 => decode_typed::<f64>(out, plan, shape, decoder),
        other => Err(invalid_argument(out.py(), format!("archive holds {other} data"))),
    }
}

fn decode_typed<T: Float>(
    out: &Bound<'_, PyAny>,
    plan: DecodePlan,
    shape: &[usize],
    decoder: &Decoder,
) -> PyResult<()> {
    let py = out.py();
    let wanted = numpy::dtype::<T>(py);
    let Ok(target) = out.cast::<PyArrayDyn<T>>() else {
        let got = out.getattr("dtype").map(|d| d.to_string()).unwrap_or_else(|_| out.get_type().to_string());
        return Err(invalid_argument(
            py,
            format!("out must be a numpy array of dtype {wanted} (the archive's), got {got}"),
        ));
    };
    if target.shape() != shape {
        return Err(invalid_argument(
            py,
            format!("out has shape {:?}, the archive holds shape {shape:?}", target.shape()),
        ));
    }
    let mut writable = target.try_readwrite().map_err(|e| invalid_argument(py, format!("out is not writable: {e}")))?;
    if !writable.is_c_contiguous() {
        return Err(invalid_argument(py, "out must be C-contiguous".to_string()));
    }
    let slice = writable.as_slice_mut().map_err(|_| invalid_argument(py, "out must be C-contiguous".to_string()))?;
    py.detach(|| decoder.run_into(plan, slice)).map_err(|e| from_library(py, e))?;
    Ok(())
}
