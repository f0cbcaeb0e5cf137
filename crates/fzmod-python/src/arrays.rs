//! numpy arrays to and from library buffers. The library takes owned `Vec`s, so input is
//! copied once here (a non-contiguous array is gathered in C order by the same copy); output
//! vectors become numpy arrays without a copy.

use crate::errors::invalid_argument;
use crate::host_memory::vec_for_copy;
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{Element, IntoPyArray, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// An input array copied into a library buffer, with its shape.
pub struct HostArray {
    pub buffer: fzmod::Buffer,
    pub shape: Vec<usize>,
}

/// Copy an f32 or f64 numpy array (any strides) into a buffer.
pub fn host_array(array: &Bound<'_, PyAny>) -> PyResult<HostArray> {
    let py = array.py();
    if let Ok(a) = array.cast::<PyArrayDyn<f32>>() {
        return Ok(HostArray { shape: a.shape().to_vec(), buffer: fzmod::Buffer::F32(elements(a)?) });
    }
    if let Ok(a) = array.cast::<PyArrayDyn<f64>>() {
        return Ok(HostArray { shape: a.shape().to_vec(), buffer: fzmod::Buffer::F64(elements(a)?) });
    }
    let dtype = array.getattr("dtype").map(|d| d.to_string()).unwrap_or_else(|_| array.get_type().to_string());
    Err(invalid_argument(py, format!("fzmod compresses float32 and float64 arrays, got {dtype}")))
}

fn elements<T: Element + Copy>(array: &Bound<'_, PyArrayDyn<T>>) -> PyResult<Vec<T>> {
    let view = array.try_readonly()?;
    let mut values = vec_for_copy(view.len());
    // `as_slice` also accepts Fortran order, whose memory is not the C order the library
    // expects: only a C-contiguous array is copied as one block.
    if let (true, Ok(contiguous)) = (view.is_c_contiguous(), view.as_slice()) {
        values.extend_from_slice(contiguous);
        return Ok(values);
    }
    let strided = view.as_array();
    if strided.ndim() == 0 {
        values.extend(strided.iter().copied());
        return Ok(values);
    }
    // Row by row, so that views with contiguous rows (a Zarr chunk cut from a larger array,
    // a slice of columns) are copied with memcpy rather than element by element.
    for row in strided.rows() {
        match row.as_slice() {
            Some(contiguous) => values.extend_from_slice(contiguous),
            None => values.extend(row.iter().copied()),
        }
    }
    Ok(values)
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

fn owned_array<'py, T: Element>(py: Python<'py>, values: Vec<T>, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let array = ArrayD::from_shape_vec(IxDyn(shape), values)
        .map_err(|e| invalid_argument(py, format!("decoded data does not fit shape {shape:?}: {e}")))?;
    Ok(array.into_pyarray(py).into_any())
}

/// Copy a decoded buffer into the caller's array, which must match it exactly.
pub fn fill(out: &Bound<'_, PyAny>, buffer: &fzmod::Buffer, shape: &[usize]) -> PyResult<()> {
    match buffer {
        fzmod::Buffer::F32(v) => fill_typed(out, v, shape),
        fzmod::Buffer::F64(v) => fill_typed(out, v, shape),
        other => Err(invalid_argument(out.py(), format!("archive holds {} data", other.dtype()))),
    }
}

fn fill_typed<T: Element + Copy>(out: &Bound<'_, PyAny>, values: &[T], shape: &[usize]) -> PyResult<()> {
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
    slice.copy_from_slice(values);
    Ok(())
}
