"""fzmod: error-bounded compression of float32/float64 arrays.

Every value of ``decompress(compress(a, mode="abs", bound=e))`` is within ``e`` of ``a``
(with ``mode="rel"``, within ``e * (max - min)`` of the finite values); NaN and ±Inf come back
bit-identical. The archive carries shape, dtype and pipeline: decoding needs nothing else.

>>> import numpy, fzmod
>>> a = numpy.linspace(0, 1, 10_000, dtype=numpy.float32).reshape(100, 100)
>>> data = fzmod.compress(a, preset="cuszp2", mode="abs", bound=1e-3)
>>> b = fzmod.decompress(data)
>>> bool(abs(b.astype("f8") - a).max() <= 1e-3), b.shape, b.dtype
(True, (100, 100), dtype('float32'))

Codecs: ``fzmod.numcodecs.Fzmod`` (numcodecs / Zarr v2), ``fzmod.zarr.FzmodCodec`` (Zarr v3),
``fzmod.h5.Fzmod`` (HDF5 filter via h5py). See docs/PYTHON.md.
"""

from importlib.metadata import PackageNotFoundError, version

import numpy

from . import _device, _hdf5_plugin, _native
from .errors import BackendUnavailable, CorruptArchive, DeviceError, FzmodError, InvalidArgument

try:
    __version__ = version("fzmod")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "compress",
    "decompress",
    "inspect",
    "presets",
    "report",
    "backend",
    "FzmodError",
    "InvalidArgument",
    "CorruptArchive",
    "BackendUnavailable",
    "DeviceError",
]

_BACKENDS = ("auto", "cpu", "cuda")


def compress(array, preset="cuszp2", mode=None, bound=None, backend="auto", pipeline=None):
    """Compress a float32 or float64 array into archive bytes.

    array: anything ``numpy.asarray`` accepts with a float32/float64 dtype; non-contiguous and
        non-native-byte-order arrays are copied, C-contiguous ones are read in place. Arrays in
        GPU memory (``__cuda_array_interface__``: CuPy, PyTorch) are compressed on the GPU
        without a copy to the host; they must be C-contiguous.
    preset: a name from ``presets()``; ignored when ``pipeline`` is given.
    mode, bound: ``"abs"`` (|x - x'| <= bound) or ``"rel"`` (<= bound * value range).
        Presets default to rel 1e-3; a pipeline keeps the bound written in it unless given.
    backend: ``"auto"`` (GPU when usable, else CPU), ``"cpu"`` or ``"cuda"``. The archive
        bytes are the same on every backend.
    pipeline: a TOML pipeline (README "Pipelines as TOML") as text, or as a dict of the
        same structure, e.g. ``{"stage": [{"name": "quant", "type": "Quantizer", ...}, ...]}``.
    """
    options = {
        "preset": _text(preset, "preset"),
        "pipeline": pipeline_text(pipeline),
        "mode": None if mode is None else _text(mode, "mode"),
        "bound": None if bound is None else _number(bound, "bound"),
        "backend": _backend(backend),
    }
    if _device.is_device_array(array):
        return _device.compress(array, **options)
    host = _float_array(array, "array")
    return _native.compress(
        host, options["preset"], options["pipeline"], options["mode"], options["bound"], options["backend"]
    )


def decompress(data, out=None, *, backend="auto", device=None):
    """Decode archive bytes into a new numpy array with the archive's shape and dtype.

    data: bytes, bytearray, memoryview, or a numpy uint8 array (read without a copy).
    out: optional C-contiguous numpy array of the archive's shape and dtype, filled in place
        and returned.
    device: ``None``/``"cpu"`` for a numpy array; ``"cuda"`` decodes on the GPU into device
        memory and returns a CuPy array (or, without CuPy, an object exposing
        ``__cuda_array_interface__``).
    """
    if device in (None, "cpu"):
        if out is not None and _device.is_device_array(out):
            raise InvalidArgument("out must be a numpy array; for device memory use device='cuda'")
        return _native.decompress(archive_view(data), out, _backend(backend))
    if device != "cuda":
        raise InvalidArgument(f"device must be None, 'cpu' or 'cuda', got {device!r}")
    if out is not None:
        raise InvalidArgument("out= is for host arrays; device='cuda' returns a new device array")
    return _device.decompress(archive_view(data), _backend(backend))


def inspect(data):
    """The archive's header as a dict: dtype, shape, error mode and bound (as asked and as
    an absolute bound), preset, stages, sizes and ratio. Verifies the checksums."""
    return _native.inspect(archive_view(data))


def presets():
    """Built-in presets: ``{name: summary}``."""
    return dict(_native.presets())


def report(original, result):
    """Quality of a reconstruction: max abs error (and its flat index), PSNR, NRMSE, value
    range, NaN/Inf mismatches; with archive bytes as ``result`` (decoded here) also the
    compression ratio."""
    original = _float_array(original, "original")
    if isinstance(result, numpy.ndarray) and result.dtype.kind == "f":
        decoded, archive_bytes = result, None
    else:
        view = archive_view(result)
        decoded, archive_bytes = decompress(view), view.nbytes
    quality = _native.compare(original, _float_array(decoded, "decoded"))
    quality["original_bytes"] = original.nbytes
    quality["compressed_bytes"] = archive_bytes
    quality["ratio"] = original.nbytes / archive_bytes if archive_bytes else None
    return quality


def backend(choice="auto"):
    """Which backend ``choice`` runs on here: ``{"name": "cpu" | "cuda", "note": why}``."""
    name, note = _native.resolve_backend(_backend(choice))
    return {"name": name, "note": note}


def pipeline_text(pipeline):
    """A pipeline argument (None, TOML text or dict) as TOML text or None."""
    if pipeline is None or isinstance(pipeline, str):
        return pipeline
    if isinstance(pipeline, dict):
        return _native.pipeline_toml(pipeline)
    raise InvalidArgument(f"pipeline must be TOML text or a dict, got {type(pipeline).__name__}")


def archive_view(data):
    """Archive bytes as a read-only uint8 numpy array, without a copy when contiguous."""
    if _device.is_device_array(data):
        raise BackendUnavailable("archive bytes in GPU memory: copy them to the host first")
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidArgument(f"archive must be bytes-like, got {type(data).__name__}") from None
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    return numpy.frombuffer(view.cast("B"), dtype=numpy.uint8)


def _float_array(array, what):
    host = numpy.asarray(array)
    if host.dtype.kind != "f" or host.dtype.itemsize not in (4, 8):
        raise InvalidArgument(f"{what}: fzmod compresses float32 and float64 arrays, got dtype {host.dtype}")
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))
    return host


def _text(value, what):
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    return value


def _number(value, what):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{what} must be a number, got {value!r}") from None


def _backend(choice):
    if choice not in _BACKENDS:
        raise InvalidArgument(f"backend must be one of {', '.join(_BACKENDS)}, got {choice!r}")
    return choice


_hdf5_plugin.make_discoverable()
