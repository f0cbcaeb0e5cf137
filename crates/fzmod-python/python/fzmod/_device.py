"""Arrays that live in GPU memory (CuPy, PyTorch CUDA tensors, anything with
``__cuda_array_interface__``; DLPack-only producers through CuPy).

Compression reads the array where it is: its interface is validated here, the pointer goes to
the library, which waits for the producer's stream and compresses on the device; only the
archive crosses to the host. Decoding to the device returns the library's own buffer, viewed
by CuPy without a copy. docs/PYTHON.md ("GPU arrays") says what is synchronised and who owns
what.
"""

from . import _native
from .errors import BackendUnavailable, InvalidArgument

# DLPack device types whose memory the CPU can read directly.
_DLPACK_HOST_DEVICES = {1, 3}  # kDLCPU, kDLCUDAHost (pinned)
_TYPESTRS = {"<f4": 4, "<f8": 8}


def is_device_array(obj):
    """True for objects whose memory is on a GPU."""
    try:
        if hasattr(obj, "__cuda_array_interface__"):
            return True
    except Exception:  # it has one, which refused (PyTorch: a tensor that requires grad)
        return True
    dlpack_device = getattr(obj, "__dlpack_device__", None)
    if dlpack_device is None or type(obj).__module__ == "numpy":
        return False
    try:
        device_type, _ = dlpack_device()
    except Exception:  # a broken __dlpack_device__ is not ours to diagnose
        return False
    return int(device_type) not in _DLPACK_HOST_DEVICES


def compress(array, *, preset, pipeline, mode, bound, backend, mask_nan=False, fill_value=None):
    """Compress a device array on the device (arguments already normalised by the caller)."""
    # `owner` (the array, or CuPy's view of a DLPack producer) stays referenced until this
    # returns, so the memory outlives the library's use of it.
    owner, interface = _interface(array)
    pointer, shape, typestr = _validate(interface, array)
    sync, stream = _producer_stream(interface)
    return _native.compress_device(
        pointer, typestr, shape, sync, stream, preset, pipeline, mode, bound, backend, mask_nan, fill_value
    )


def decompress(data, backend):
    """Decode archive bytes into device memory: a CuPy array when CuPy is installed, else the
    library's ``DeviceArray`` (any ``__cuda_array_interface__`` consumer takes it)."""
    owner = _native.decompress_device(data, backend)
    try:
        import cupy
    except ImportError:
        return owner
    # Zero-copy: CuPy keeps `owner` (and so the device buffer) alive as the view's base.
    return cupy.asarray(owner)


def _interface(array):
    """(owner of the memory, its __cuda_array_interface__)."""
    try:
        return array, array.__cuda_array_interface__
    except AttributeError:
        pass
    except Exception as e:  # e.g. PyTorch refuses tensors that require grad
        raise InvalidArgument(f"{type(array).__name__}.__cuda_array_interface__ failed: {e}") from e
    # A DLPack-only producer (JAX, ...): CuPy imports it without a copy and describes it.
    try:
        import cupy
    except ImportError:
        raise BackendUnavailable(
            f"cannot compress a {type(array).__name__} in GPU memory: it has no __cuda_array_interface__, "
            "and reading its DLPack capsule needs CuPy (pip install cupy-cuda12x)"
        ) from None
    try:
        view = cupy.from_dlpack(array)
        return view, view.__cuda_array_interface__
    except Exception as e:
        raise InvalidArgument(f"cannot import the {type(array).__name__} through DLPack: {e}") from e


def _validate(interface, array):
    """(pointer, shape, typestr) of a C-contiguous float32/float64 device array, or
    ``InvalidArgument`` saying what is wrong."""
    name = type(array).__name__
    typestr = interface.get("typestr")
    if typestr not in _TYPESTRS:
        raise InvalidArgument(f"fzmod compresses float32 and float64 arrays, got {name} of typestr {typestr!r}")
    try:
        shape = tuple(int(n) for n in interface["shape"])
        pointer, _read_only = interface["data"]
        pointer = int(pointer)
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgument(f"{name}.__cuda_array_interface__ is malformed: {e!r}") from None
    if interface.get("mask") is not None:
        raise InvalidArgument(f"masked device arrays are not supported ({name})")
    if not shape:
        raise InvalidArgument("a 0-d array has no shape to compress: reshape it to (1,)")
    if 0 in shape or pointer == 0:
        raise InvalidArgument(f"cannot compress an empty array (shape {shape})")
    strides = interface.get("strides")
    if strides is not None and not _is_c_contiguous(shape, tuple(strides), _TYPESTRS[typestr]):
        raise InvalidArgument(
            f"device arrays must be C-contiguous (shape {shape}, strides {tuple(strides)}): "
            "copy it first (cupy.ascontiguousarray(x), x.contiguous())"
        )
    return pointer, shape, typestr


def _is_c_contiguous(shape, strides, itemsize):
    if len(shape) != len(strides):
        return False
    expected = itemsize
    for n, stride in zip(reversed(shape), reversed(strides)):
        # A dimension of length 1 is never stepped over: any stride describes the same memory.
        if n != 1 and stride != expected:
            return False
        expected *= n
    return True


def _producer_stream(interface):
    """What to wait for before reading: ``(sync, stream)`` for the native call.

    Interface v3 names the stream the producer wrote on: ``None`` means the data is ready,
    an integer is a ``CUstream`` to synchronise (1: legacy default, 2: per-thread default;
    0 is disallowed by the specification). Older producers (PyTorch reports version 2) name
    none, so every stream of the context is synchronised, as ``torch.cuda.synchronize()``.
    """
    if interface.get("version", 0) >= 3 and "stream" in interface:
        stream = interface["stream"]
        if stream is None:
            return False, None
        if stream == 0:
            raise InvalidArgument("__cuda_array_interface__ stream 0 is disallowed (ambiguous)")
        return True, int(stream)
    return True, None
