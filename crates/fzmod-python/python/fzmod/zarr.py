"""fzmod as a Zarr v3 array-to-bytes codec (``"name": "fzmod"``): use it as the array's
``serializer``, alone or inside sharding. Registered through the ``zarr.codecs`` entry point,
so an array written with it opens in a process that never imported fzmod.

Chunk shape and dtype come from Zarr's chunk spec (and are checked against the archive on
decode). ``mode="rel"`` is relative to each chunk's value range (``fzmod.xarray.encoding``
sets an absolute bound from a whole variable's range instead). (De)compression runs in a
worker thread with the GIL released, so Zarr's concurrent chunk I/O compresses in parallel.

Masks: by default the codec masks NaN and the array's ``fill_value`` (unless that is zero,
Zarr's default for float arrays, which is usually data rather than a marker): a Mask stage
runs in front of the preset, so land points, a CF ``_FillValue`` written as the Zarr fill
value and the fill padding of a partial edge chunk cost a few bytes of run lengths instead of
one outlier each, and ``mode="rel"`` is relative to the unmasked values. ``fill_value=v``
masks ``v`` instead, ``fill_value=None`` no fill value, ``mask_nan=False`` no NaN.

Future work: with ``zarr.config.enable_gpu()`` the chunk buffers are CuPy arrays; the codec
could hand them to the device path (``fzmod._device``) instead of the host one.
"""

import asyncio
from dataclasses import dataclass

import numpy
from zarr.abc.codec import ArrayBytesCodec
from zarr.core.common import parse_named_configuration

import fzmod

_FLOAT_DTYPES = (numpy.dtype("float32"), numpy.dtype("float64"))


#: Version of the codec's configuration schema, written into array metadata; shared with the
#: Rust codec (crates/fzmod-zarrs). Arrays written before it existed carry no version: 1.
CONFIGURATION_VERSION = 1

#: ``fill_value`` setting: mask the array's own Zarr fill value (the default).
ARRAY_FILL = "array"
_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


@dataclass(frozen=True)
class FzmodCodec(ArrayBytesCodec):
    """Zarr v3 serializer. Arguments as for ``fzmod.compress``, checked here (a wrong setting
    raises ``fzmod.InvalidArgument`` now, not inside ``to_zarr``). The metadata records the
    bound the codec runs at; ``pipeline`` is kept as TOML text so it stays JSON."""

    is_fixed_size = False

    preset: str
    mode: "str | None"
    bound: "float | None"
    backend: str
    pipeline: "str | None"
    mask_nan: bool
    fill_value: "float | str | None"

    def __init__(
        self,
        *,
        preset: "str | None" = None,
        mode: "str | None" = None,
        bound: "float | None" = None,
        backend: str = "auto",
        pipeline: "fzmod.Pipeline" = None,
        mask_nan: bool = True,
        fill_value: "float | str | None" = ARRAY_FILL,
    ) -> None:
        pipeline = fzmod.pipeline_text(pipeline)
        preset = fzmod.DEFAULT_PRESET if preset is None else preset
        fill_value = _parse_fill(fill_value)
        if fill_value is not None and fill_value != fill_value:  # NaN: the mask_nan flag's job
            mask_nan, fill_value = True, None
        # Checked with the fill value a chunk could bring (any number will do).
        probe = 0.0 if fill_value == ARRAY_FILL else fill_value
        resolved = fzmod.resolve_bound(preset, mode, bound, backend, pipeline, mask_nan=mask_nan, fill_value=probe)
        mode, bound = resolved if resolved is not None else (None, None)
        object.__setattr__(self, "preset", preset)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "bound", bound)
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "pipeline", pipeline)
        object.__setattr__(self, "mask_nan", mask_nan)
        object.__setattr__(self, "fill_value", fill_value)

    @classmethod
    def from_dict(cls, data) -> "FzmodCodec":
        _, configuration = parse_named_configuration(data, "fzmod", require_configuration=False)
        settings = dict(configuration or {})
        version = settings.pop("version", CONFIGURATION_VERSION)
        if version != CONFIGURATION_VERSION:
            raise fzmod.InvalidArgument(
                f"fzmod codec configuration version {version!r} is not supported (this build reads "
                f"{CONFIGURATION_VERSION})"
            )
        try:
            return cls(**settings)
        except TypeError as e:  # an unknown key: a configuration this version cannot honour
            raise fzmod.InvalidArgument(f"fzmod codec configuration: {e}") from None

    def to_dict(self) -> dict:
        configuration = {"version": CONFIGURATION_VERSION, "preset": self.preset, "backend": self.backend}
        if self.mode is not None:
            configuration.update(mode=self.mode, bound=self.bound)
        if self.pipeline is not None:
            configuration["pipeline"] = self.pipeline
        # The defaults are not written, so arrays without a changed mask keep the metadata
        # that earlier versions (and the Rust codec of crates/fzmod-zarrs) read.
        if not self.mask_nan:
            configuration["mask_nan"] = False
        if self.fill_value != ARRAY_FILL:
            configuration["fill_value"] = _fill_json(self.fill_value)
        return {"name": "fzmod", "configuration": configuration}

    def chunk_mask(self, chunk_spec) -> "tuple[bool, float | None]":
        """``(mask_nan, fill_value)`` for a chunk of this spec (``fill_value="array"``: the
        array's, unless it is zero or NaN)."""
        fill = self.fill_value
        if fill == ARRAY_FILL:
            fill = _array_fill(getattr(chunk_spec, "fill_value", None))
        if fill is not None and fill != fill:  # NaN: the mask_nan flag's job
            return True, None
        return self.mask_nan, fill

    def validate(self, *, shape, dtype, chunk_grid):
        if dtype.to_native_dtype() not in _FLOAT_DTYPES:
            raise fzmod.InvalidArgument(f"the fzmod codec takes float32 or float64 arrays, got {dtype}")

    def compute_encoded_size(self, input_byte_length, chunk_spec):
        raise NotImplementedError("fzmod archives vary in size")

    def _encode_sync(self, chunk_array, chunk_spec):
        mask_nan, fill_value = self.chunk_mask(chunk_spec)
        archive = fzmod.compress(
            chunk_array.as_numpy_array(),
            preset=self.preset,
            mode=self.mode,
            bound=self.bound,
            backend=self.backend,
            pipeline=self.pipeline,
            mask_nan=mask_nan,
            fill_value=fill_value,
        )
        return chunk_spec.prototype.buffer.from_bytes(archive)

    def _decode_sync(self, chunk_bytes, chunk_spec):
        decoded = fzmod.decompress(chunk_bytes.as_numpy_array(), backend=self.backend)
        expected = chunk_spec.dtype.to_native_dtype()
        if decoded.shape != tuple(chunk_spec.shape) or decoded.dtype != expected:
            raise fzmod.CorruptArchive(
                f"chunk archive holds {decoded.dtype}{list(decoded.shape)}, "
                f"the array expects {expected}{list(chunk_spec.shape)}"
            )
        return chunk_spec.prototype.nd_buffer.from_numpy_array(decoded)

    async def _encode_single(self, chunk_array, chunk_spec):
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)

    async def _decode_single(self, chunk_bytes, chunk_spec):
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)


def _parse_fill(value):
    """The ``fill_value`` setting: ``"array"``, None, or a float (Zarr's JSON spellings of the
    non-finite numbers accepted)."""
    if value is None or value == ARRAY_FILL:
        return value
    if isinstance(value, str):
        if value not in _NON_FINITE:
            raise fzmod.InvalidArgument(
                f"fill_value must be a number, 'array', None or one of {', '.join(_NON_FINITE)}, got {value!r}"
            )
        return _NON_FINITE[value]
    try:
        return float(value)
    except (TypeError, ValueError):
        raise fzmod.InvalidArgument(f"fill_value must be a number, 'array' or None, got {value!r}") from None


def _fill_json(value):
    if value is None or numpy.isfinite(value):
        return value
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _array_fill(value):
    """The array's fill value as a number to mask, or None (none, not a float, or zero)."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if value == 0.0 else value
