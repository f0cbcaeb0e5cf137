//! Arrays in GPU memory. Python (`fzmod/_device.py`) reads and validates the producer's
//! `__cuda_array_interface__`; here its pointer is wrapped without a copy, the producer's
//! stream is waited for, and the library compresses on the device. Decoding to the device
//! hands back a [`DeviceArray`] that owns the library's buffer and exposes it through the same
//! interface, so CuPy (or any consumer) views it without a copy.
//!
//! Nothing here needs CUDA at build time: the driver is loaded when the CUDA backend is first
//! selected, and every call below selects it first (no GPU → `BackendUnavailable`).

use crate::compressors;
use crate::errors::{from_library, invalid_argument, raise};
use crate::header;
use crate::pipeline::PipelineRequest;
use cudarc::driver::{sys, CudaContext, DriverError};
use fzmod::backend::cuda::device::DeviceBuffer;
use fzmod::backend::{Backend, BackendChoice};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// fzmod runs on the primary context of device 0 (the one CuPy and PyTorch use for it).
const DEVICE_ORDINAL: usize = 0;

/// The CUDA backend, or `BackendUnavailable`. A device array cannot go to the CPU backend
/// without the host round trip this path exists to avoid.
fn cuda(py: Python<'_>, choice: &str) -> PyResult<Backend> {
    if !matches!(choice, "auto" | "cuda") {
        return Err(invalid_argument(
            py,
            format!("GPU arrays are (de)compressed on the CUDA backend, not '{choice}': copy to the host for the CPU"),
        ));
    }
    Backend::select(BackendChoice::Cuda).map(|(b, _)| b).map_err(|e| from_library(py, e))
}

fn driver_error(py: Python<'_>, what: &str, e: DriverError) -> PyErr {
    raise(py, "DeviceError", format!("{what}: {e}"))
}

/// The device ordinal `ptr` belongs to, or why it is not device memory.
fn device_of(ptr: u64) -> Result<i32, DriverError> {
    let mut ordinal: i32 = -1;
    // SAFETY: a pointer-attribute query that writes one int into `ordinal`; the driver
    // checks `ptr` itself.
    unsafe {
        sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
        .result()?;
    }
    Ok(ordinal)
}

/// Wait until the producer's writes are done: `Some(stream)` (the interface's `stream`, a
/// `CUstream` handle, 1 and 2 being the legacy and per-thread default streams) or, for a
/// producer that names no stream, every stream of the context (as `torch.cuda.synchronize()`).
fn wait_for_producer(context: &CudaContext, stream: Option<u64>) -> Result<(), DriverError> {
    match stream {
        // SAFETY: a stream handle of this context, as the interface promises; synchronising
        // a stream only waits.
        Some(handle) => unsafe { sys::cuStreamSynchronize(handle as sys::CUstream).result() },
        None => context.synchronize(),
    }
}

/// Compress `len` elements of `typestr` (`<f4`/`<f8`, C order, `shape`) at device address
/// `ptr`, written by `stream` (see [`wait_for_producer`]; `sync` false: nothing to wait for).
#[pyfunction]
#[pyo3(signature = (ptr, typestr, shape, sync, stream, preset, pipeline, mode, bound, backend_choice, mask_nan=false, fill_value=None))]
#[allow(clippy::too_many_arguments)] // the Python call's arguments, one to one
pub fn compress_device(
    py: Python<'_>,
    ptr: u64,
    typestr: &str,
    shape: Vec<usize>,
    sync: bool,
    stream: Option<u64>,
    preset: &str,
    pipeline: Option<&str>,
    mode: Option<&str>,
    bound: Option<f64>,
    backend_choice: &str,
    mask_nan: bool,
    fill_value: Option<f64>,
) -> PyResult<Vec<u8>> {
    let dtype = match typestr {
        "<f4" => fzmod::DType::F32,
        "<f8" => fzmod::DType::F64,
        other => return Err(invalid_argument(py, format!("fzmod compresses float32 and float64 arrays, got {other}"))),
    };
    let len = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let len = len.ok_or_else(|| invalid_argument(py, format!("shape {shape:?} is too large")))?;
    if !ptr.is_multiple_of(dtype.size() as u64) {
        return Err(invalid_argument(py, format!("device address {ptr:#x} is not aligned for {dtype}")));
    }
    let backend = cuda(py, backend_choice)?;
    // The pointer and the producer's stream belong to device 0's primary context (the one
    // CuPy and PyTorch use); `CudaContext::new` retains it and makes it current on this thread,
    // which the driver calls below act on.
    let context = py
        .detach(|| CudaContext::new(DEVICE_ORDINAL))
        .map_err(|e| driver_error(py, "making the CUDA context current", e))?;
    match device_of(ptr) {
        Ok(ordinal) if ordinal == DEVICE_ORDINAL as i32 => {}
        Ok(ordinal) => {
            return Err(invalid_argument(py, format!("the array is on device {ordinal}; fzmod runs on device 0")))
        }
        Err(e) => return Err(invalid_argument(py, format!("address {ptr:#x} is not CUDA device memory ({e})"))),
    }
    if sync {
        py.detach(|| wait_for_producer(&context, stream))
            .map_err(|e| driver_error(py, "waiting for the array's stream", e))?;
    }
    let request = PipelineRequest { preset, toml: pipeline, mode, bound, mask: crate::mask_spec(mask_nan, fill_value) };
    let compressor = compressors::get(py, &request, dtype, &shape, &backend)?;
    // SAFETY: `ptr` is device-0 memory (checked above) holding `len` elements of `dtype`
    // (the producer's interface says so; alignment checked), and the Python caller keeps the
    // producing array alive for this call. The producer's pending writes were waited for;
    // writes the caller starts during the call are the caller's race, as with any consumer.
    let input = unsafe { DeviceBuffer::borrowed(dtype, ptr, len) };
    py.detach(|| compressor.compress_device(&input, &shape)).map_err(|e| from_library(py, e))
}

/// A decoded array in device memory, owned by this object and exposed through
/// `__cuda_array_interface__` (version 3). Its memory is freed when the object goes, so a
/// consumer that views it (CuPy) keeps a reference, as the interface requires.
#[pyclass(module = "fzmod._native", frozen)]
pub struct DeviceArray {
    buffer: DeviceBuffer,
    address: u64,
    typestr: &'static str,
    shape: Vec<usize>,
}

#[pymethods]
impl DeviceArray {
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let interface = PyDict::new(py);
        interface.set_item("version", 3)?;
        interface.set_item("typestr", self.typestr)?;
        interface.set_item("shape", pyo3::types::PyTuple::new(py, &self.shape)?)?;
        interface.set_item("data", (self.address, false))?;
        interface.set_item("strides", py.None())?;
        // The decode finished before the object was made: nothing to wait for.
        interface.set_item("stream", py.None())?;
        Ok(interface)
    }

    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        self.buffer.dtype.toml_name()
    }

    fn __repr__(&self) -> String {
        format!("DeviceArray(shape={:?}, dtype={}, address={:#x})", self.shape, self.dtype(), self.address)
    }
}

/// Decode archive bytes into device memory.
#[pyfunction]
pub fn decompress_device(
    py: Python<'_>,
    data: PyReadonlyArray1<'_, u8>,
    backend_choice: &str,
) -> PyResult<DeviceArray> {
    let bytes = data.as_slice().map_err(|_| invalid_argument(py, "archive bytes must be contiguous".into()))?;
    let backend = cuda(py, backend_choice)?;
    let Backend::Cuda(device) = &backend else {
        return Err(raise(py, "BackendUnavailable", "the CUDA backend is not available".into()));
    };
    let decoder = fzmod::Decoder::new(backend.clone());
    let (buffer, header) = py.detach(|| decoder.decompress_device(bytes)).map_err(|e| from_library(py, e))?;
    let typestr = match buffer.dtype {
        fzmod::DType::F32 => "<f4",
        fzmod::DType::F64 => "<f8",
        other => return Err(invalid_argument(py, format!("archive holds {other} data"))),
    };
    let shape = header::shape(py, &header)?;
    Ok(DeviceArray { address: device.address_of(&buffer), buffer, typestr, shape })
}
