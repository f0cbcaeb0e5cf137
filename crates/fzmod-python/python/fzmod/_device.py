"""Arrays that live in GPU memory (CuPy, PyTorch, JAX, Numba...).

The library has no device entry points yet, so a device array is refused with a clear error
instead of being copied to the host behind the user's back. When the library exposes them,
``compress`` and ``decompress`` below are where the device path goes: they receive the
array's ``__cuda_array_interface__`` (pointer, shape, typestr, stream) or DLPack capsule.
"""

from .errors import BackendUnavailable

# DLPack device types whose memory the CPU can read directly.
_DLPACK_HOST_DEVICES = {1, 3}  # kDLCPU, kDLCUDAHost (pinned)

_NO_DEVICE_PATH = (
    "this fzmod build has no entry point for GPU-resident arrays yet; copy the array to the "
    "host first (cupy.asnumpy(x), x.cpu().numpy()), or decode to a numpy array and upload it"
)


def is_device_array(obj):
    """True for objects whose memory is on a GPU."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    dlpack_device = getattr(obj, "__dlpack_device__", None)
    if dlpack_device is None or type(obj).__module__ == "numpy":
        return False
    try:
        device_type, _ = dlpack_device()
    except Exception:  # a broken __dlpack_device__ is not ours to diagnose
        return False
    return int(device_type) not in _DLPACK_HOST_DEVICES


def compress(array, **_options):
    """Compress a device-resident array on the device (not yet possible: see module doc)."""
    raise BackendUnavailable(f"cannot compress a {type(array).__name__} in GPU memory: {_NO_DEVICE_PATH}")


def decompress(_data, device, **_options):
    """Decode into device memory (not yet possible: see module doc)."""
    raise BackendUnavailable(f"cannot decode into device memory ({device!r}): {_NO_DEVICE_PATH}")
