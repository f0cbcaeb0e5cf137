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

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Optional, Tuple, Union

import numpy

from . import _device, _hdf5_plugin, _native
from .errors import BackendUnavailable, CorruptArchive, DeviceError, FzmodError, InvalidArgument

try:
    __version__ = version("fzmod")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

#: The preset used when neither a preset nor a pipeline is named (the library's default).
DEFAULT_PRESET: str = _native.DEFAULT_PRESET

__all__ = [
    "compress",
    "decompress",
    "compress_stream",
    "decompress_stream",
    "inspect",
    "presets",
    "report",
    "backend",
    "resolve_bound",
    "DEFAULT_PRESET",
    "FzmodError",
    "InvalidArgument",
    "CorruptArchive",
    "BackendUnavailable",
    "DeviceError",
]

#: A pipeline argument: TOML text or a dict of the same structure.
Pipeline = Union[str, dict, None]


def compress(
    array: Any,
    preset: Optional[str] = None,
    mode: Optional[str] = None,
    bound: Optional[float] = None,
    backend: str = "auto",
    pipeline: Pipeline = None,
    *,
    mask_nan: bool = False,
    fill_value: Optional[float] = None,
    chunk: Optional[str] = None,
) -> bytes:
    """Compress a float32 or float64 array into archive bytes.

    array: anything ``numpy.asarray`` accepts with a float32/float64 dtype; non-contiguous and
        non-native-byte-order arrays are copied, C-contiguous ones are read in place. Arrays in
        GPU memory (``__cuda_array_interface__``: CuPy, PyTorch) are compressed on the GPU
        without a copy to the host; they must be C-contiguous.
    preset: a name from ``presets()`` (default ``DEFAULT_PRESET``); ignored when ``pipeline``
        is given.
    mode, bound: ``"abs"`` (|x - x'| <= bound) or ``"rel"`` (<= bound * value range). A bound
        alone is relative; a mode alone needs the preset's or pipeline's own bound to have that
        mode (presets carry rel 1e-3), else ``InvalidArgument``; neither keeps that bound.
    backend: ``"auto"`` (GPU when usable, else CPU), ``"cpu"`` or ``"cuda"``. The archive
        bytes are the same on every backend.
    pipeline: a TOML pipeline (README "Pipelines as TOML") as text, or as a dict of the
        same structure, e.g. ``{"stage": [{"name": "quant", "type": "Quantizer", ...}, ...]}``.
    mask_nan, fill_value: put a Mask stage (docs/FORMAT.md 6.16) in front of the preset or
        pipeline. ``mask_nan=True`` masks every NaN; ``fill_value=v`` masks the exact value
        ``v`` (a land or missing marker such as a CF ``_FillValue``; as the array's dtype's
        nearest value) and NaN too (``fill_value=nan`` is ``mask_nan=True``). Masked points
        are stored as a run-length mask and come back bit for bit; they are filled from a
        neighbour before prediction, and ``mode="rel"`` is then relative to the range of the
        unmasked values.
    chunk: write a chunked archive (docs/FORMAT.md §8) of independent chunks of this shape
        (``"64x64x64"``, or ``"auto"``: slabs of up to 4 MiB along the slowest dimensions, the
        fastest whole; near-cubic boxes of 1-4 MiB for arrays of 256 MiB and more), so
        ``decompress(..., region=...)`` decodes only the chunks a box meets. Host arrays only.
    """
    options = _options(preset, mode, bound, backend, pipeline, mask_nan, fill_value)
    if _device.is_device_array(array):
        if chunk is not None:
            raise InvalidArgument("chunk= takes host arrays")
        return _device.compress(array, **options)
    host = _float_array(array, "array")
    return _native.compress(
        host,
        options["preset"],
        options["pipeline"],
        options["mode"],
        options["bound"],
        options["backend"],
        options["mask_nan"],
        options["fill_value"],
        chunk,
    )


def resolve_bound(
    preset: Optional[str] = None,
    mode: Optional[str] = None,
    bound: Optional[float] = None,
    backend: str = "auto",
    pipeline: Pipeline = None,
    *,
    mask_nan: bool = False,
    fill_value: Optional[float] = None,
) -> Optional[Tuple[str, float]]:
    """The ``(mode, value)`` that ``compress`` with these settings runs at (``None`` for a
    pipeline without a bound), raising ``InvalidArgument`` for any setting ``compress`` would
    refuse. The codecs call it when they are built, so a wrong setting fails there."""
    o = _options(preset, mode, bound, backend, pipeline, mask_nan, fill_value)
    return _native.resolve_settings(
        o["preset"], o["pipeline"], o["mode"], o["bound"], o["backend"], o["mask_nan"], o["fill_value"]
    )


def _region_text(region: Any) -> str:
    """A region as the library's slice text: a string as is, or a tuple of slices and ints."""
    if isinstance(region, str):
        return region
    items = region if isinstance(region, (tuple, list)) else (region,)
    parts = []
    for item in items:
        if isinstance(item, slice):
            if item.step not in (None, 1):
                raise InvalidArgument(f"region slice {item}: only step 1 is supported")
            start = "" if item.start is None else str(int(item.start))
            stop = "" if item.stop is None else str(int(item.stop))
            parts.append(f"{start}:{stop}")
        elif isinstance(item, (int, numpy.integer)):
            parts.append(str(int(item)))
        else:
            raise InvalidArgument(f"region items must be slices or ints, got {item!r}")
    return ",".join(parts)


def decompress(
    data: Any,
    out: Optional[numpy.ndarray] = None,
    *,
    backend: str = "auto",
    device: Optional[str] = None,
    region: Any = None,
) -> Any:
    """Decode archive bytes into a new numpy array with the archive's shape and dtype.

    region: decode only this box, given as numpy-style slices in C order, either a string
        (``"10:20,0:73,5:100"``) or a tuple (``numpy.s_[10:20, :, 5:100]``); an int keeps its
        dimension with extent 1, steps other than 1 are refused. Of a chunked archive only
        the chunks the box meets are decoded; the result has the box's shape.

    data: bytes, bytearray, memoryview, or a numpy uint8 array (read without a copy).
    out: optional C-contiguous numpy array of the archive's shape and dtype, filled in place
        and returned.
    device: ``None``/``"cpu"`` for a numpy array; ``"cuda"`` decodes on the GPU into device
        memory and returns a CuPy array (or, without CuPy, an object exposing
        ``__cuda_array_interface__``).
    """
    if region is not None:
        if out is not None or device not in (None, "cpu"):
            raise InvalidArgument("region= returns a new host array: give neither out= nor device='cuda'")
        return _native.decompress_region(archive_view(data), _region_text(region), _backend(backend))
    if device in (None, "cpu"):
        if out is not None and _device.is_device_array(out):
            raise InvalidArgument("out must be a numpy array; for device memory use device='cuda'")
        return _native.decompress(archive_view(data), out, _backend(backend))
    if device != "cuda":
        raise InvalidArgument(f"device must be None, 'cpu' or 'cuda', got {device!r}")
    if out is not None:
        raise InvalidArgument("out= is for host arrays; device='cuda' returns a new device array")
    return _device.decompress(archive_view(data), _backend(backend))


def compress_stream(
    src: Any,
    dst: Any,
    *,
    dtype: Any,
    shape: Any,
    preset: Optional[str] = None,
    mode: Optional[str] = None,
    bound: Optional[float] = None,
    backend: str = "auto",
    pipeline: Pipeline = None,
    mask_nan: bool = False,
    fill_value: Optional[float] = None,
    chunk: str = "auto",
    value_range: Optional[Tuple[float, float]] = None,
) -> dict:
    """Compress a raw array too large for memory into a streamed archive (format 2.1,
    docs/FORMAT.md §8.5), slab by slab: memory stays about one slab of values (a few grid
    steps of chunks along the first dimension) whatever the array's size.

    src: a path, or a binary file object with ``read``, holding the array's values as raw
        little-endian ``dtype`` in C order (what ``ndarray.tofile`` writes), from its current
        position. dst: a path (removed again if compressing fails) or a binary file object
        with ``write``. Neither is closed when given as an object.
    dtype, shape: of the array (``"float32"``/``"float64"``; a tuple of extents).
    chunk: the chunk shape (``"64x64x64"``) or ``"auto"``; the other settings as in
        ``compress``.
    value_range: ``(min, max)`` of the finite values, for a relative bound. Without it a
        relative bound reads a seekable ``src`` twice (a first pass finds the range, then it
        seeks back); a ``src`` that cannot seek (a pipe) raises ``InvalidArgument`` asking for
        the range or an absolute bound.

    Returns the archive's facts (as ``inspect``). ``decompress`` and
    ``decompress(..., region=...)`` read the result like any archive.
    """
    options = _options(preset, mode, bound, backend, pipeline, mask_nan, fill_value)
    kind = _stream_dtype(dtype)
    dims = _shape(shape)
    bounds = None if value_range is None else _value_range(value_range)
    with ExitStack() as files:
        source = _open(files, src, "rb", "src")
        seekable = bool(getattr(source, "seekable", lambda: False)())
        with _output(files, dst) as sink:
            facts = _native.compress_stream(
                source,
                sink,
                seekable,
                kind,
                dims,
                options["preset"],
                options["pipeline"],
                options["mode"],
                options["bound"],
                options["backend"],
                options["mask_nan"],
                options["fill_value"],
                _text(chunk, "chunk"),
                bounds,
            )
    return json.loads(facts)


def decompress_stream(src: Any, dst: Any, *, backend: str = "auto") -> dict:
    """Decode an archive from ``src`` (a path or a binary file object with ``read``) into
    ``dst`` (a path, removed again on failure, or a binary file object with ``write``) as raw
    little-endian values in C order. A streamed archive (``compress_stream``, format 2.1) is
    decoded slab by slab in memory bounded by one slab, even from a pipe; any other archive is
    read and decoded whole. Returns ``{"dtype": numpy's name, "shape": [...]}``."""
    with ExitStack() as files:
        source = _open(files, src, "rb", "src")
        with _output(files, dst) as sink:
            kind, shape = _native.decompress_stream(source, sink, _backend(backend))
    return {"dtype": {"f32": "float32", "f64": "float64"}.get(kind, kind), "shape": list(shape)}


def _is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


def _open(files, f, mode, what):
    if _is_path(f):
        return files.enter_context(open(f, mode))
    if not hasattr(f, "read" if "r" in mode else "write"):
        raise InvalidArgument(f"{what} must be a path or a binary file object, got {type(f).__name__}")
    return f


class _output:
    """A destination to write: a path is opened, and removed again when writing fails."""

    def __init__(self, files, dst):
        self.path = dst if _is_path(dst) else None
        self.file = _open(files, dst, "wb", "dst")

    def __enter__(self):
        return self.file

    def __exit__(self, kind, value, traceback):
        if self.path is not None:
            self.file.close()
            if kind is not None:
                os.remove(self.path)
        return False


def _stream_dtype(dtype):
    try:
        kind = numpy.dtype(dtype)
    except TypeError:
        raise InvalidArgument(f"dtype {dtype!r} is not a numpy dtype") from None
    if kind.kind != "f" or kind.itemsize not in (4, 8):
        raise InvalidArgument(f"dtype: fzmod compresses float32 and float64 arrays, got {kind}")
    return "f32" if kind.itemsize == 4 else "f64"


def _shape(shape):
    dims = (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
    if not dims or not all(isinstance(d, (int, numpy.integer)) and d >= 1 for d in dims):
        raise InvalidArgument(f"shape must be extents >= 1, got {shape!r}")
    return [int(d) for d in dims]


def _value_range(value_range):
    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        raise InvalidArgument(f"value_range must be (min, max), got {value_range!r}") from None
    if not (numpy.isfinite(lo) and numpy.isfinite(hi) and lo <= hi):
        raise InvalidArgument(f"value_range {value_range!r}: finite min <= max")
    return (lo, hi)


def inspect(data: Any) -> dict:
    """The archive's facts, under the names the CLI's ``inspect --json`` uses (docs/FORMAT.md,
    "Reported facts"): ``format_version``, ``dtype`` (numpy's name), ``shape`` (a list),
    ``num_elements``, ``original_bytes``, ``compressed_bytes``, ``ratio``, ``bits_per_value``,
    ``preset``, ``error_mode``, ``error_bound`` (as asked), ``abs_bound`` (the guaranteed
    absolute error; ``None`` for lossless archives), ``stored_raw`` and ``stages``. Verifies
    the checksums."""
    return json.loads(_native.inspect(archive_view(data)))


def presets() -> dict:
    """Built-in presets: ``{name: summary}``."""
    return dict(_native.presets())


def report(original: Any, result: Any, abs_bound: Optional[float] = None) -> dict:
    """How a reconstruction compares with its original, under the CLI's report names:
    ``value_min``, ``value_max``, ``max_abs_error``, ``max_error_index`` (flat), ``psnr_db``,
    ``nrmse``, ``special_value_mismatches`` (NaN/Inf not bit-identical) and ``within_bound``.

    With archive bytes as ``result`` (decoded here) the archive's facts (``inspect``) are
    included, and the reconstruction is judged against the archive's own ``abs_bound``. With
    a decoded array, it is judged against ``abs_bound`` when given; else ``within_bound`` is
    ``None`` (nothing to judge against)."""
    original = _float_array(original, "original")
    if isinstance(result, numpy.ndarray) and result.dtype.kind == "f":
        decoded, facts = result, {}
    else:
        view = archive_view(result)
        decoded, facts = decompress(view), inspect(view)
        if abs_bound is None:
            abs_bound = facts["abs_bound"]
    judged = abs_bound is not None or bool(facts)
    bound = None if abs_bound is None else _number(abs_bound, "abs_bound")
    quality = json.loads(_native.compare(original, _float_array(decoded, "decoded"), bound))
    if not judged:
        quality["within_bound"] = None
    return {**facts, **quality}


def backend(choice: str = "auto") -> dict:
    """Which backend ``choice`` runs on here: ``{"name": "cpu" | "cuda", "note": why}``."""
    name, note = _native.resolve_backend(_backend(choice))
    return {"name": name, "note": note}


def pipeline_text(pipeline: Pipeline) -> Optional[str]:
    """A pipeline argument (None, TOML text or dict) as TOML text or None."""
    if pipeline is None or isinstance(pipeline, str):
        return pipeline
    if isinstance(pipeline, dict):
        return _native.pipeline_toml(pipeline)
    raise InvalidArgument(f"pipeline must be TOML text or a dict, got {type(pipeline).__name__}")


def archive_view(data: Any) -> numpy.ndarray:
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
    # The library parses the name (and lists what it accepts when it refuses it).
    return _text(choice, "backend")


def _options(preset, mode, bound, backend, pipeline, mask_nan=False, fill_value=None):
    """compress's settings, type-checked and with the library's default preset."""
    if not isinstance(mask_nan, (bool, numpy.bool_)):
        raise InvalidArgument(f"mask_nan must be True or False, got {mask_nan!r}")
    return {
        "mask_nan": bool(mask_nan),
        "fill_value": None if fill_value is None else _number(fill_value, "fill_value"),
        "preset": DEFAULT_PRESET if preset is None else _text(preset, "preset"),
        "pipeline": pipeline_text(pipeline),
        "mode": None if mode is None else _text(mode, "mode"),
        "bound": None if bound is None else _number(bound, "bound"),
        "backend": _backend(backend),
    }


_hdf5_plugin.make_discoverable()
