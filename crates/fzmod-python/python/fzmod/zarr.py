"""fzmod as a Zarr v3 array-to-bytes codec (``"name": "fzmod"``): use it as the array's
``serializer``, alone or inside sharding. Registered through the ``zarr.codecs`` entry point,
so an array written with it opens in a process that never imported fzmod.

Chunk shape and dtype come from Zarr's chunk spec (and are checked against the archive on
decode). ``mode="rel"`` is relative to each chunk's value range (``fzmod.xarray.encoding``
sets an absolute bound from a whole variable's range instead). (De)compression runs in a
worker thread with the GIL released, so Zarr's concurrent chunk I/O compresses in parallel.

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

    def __init__(
        self,
        *,
        preset: "str | None" = None,
        mode: "str | None" = None,
        bound: "float | None" = None,
        backend: str = "auto",
        pipeline: "fzmod.Pipeline" = None,
    ) -> None:
        pipeline = fzmod.pipeline_text(pipeline)
        preset = fzmod.DEFAULT_PRESET if preset is None else preset
        resolved = fzmod.resolve_bound(preset, mode, bound, backend, pipeline)
        mode, bound = resolved if resolved is not None else (None, None)
        object.__setattr__(self, "preset", preset)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "bound", bound)
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "pipeline", pipeline)

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
        return {"name": "fzmod", "configuration": configuration}

    def validate(self, *, shape, dtype, chunk_grid):
        if dtype.to_native_dtype() not in _FLOAT_DTYPES:
            raise fzmod.InvalidArgument(f"the fzmod codec takes float32 or float64 arrays, got {dtype}")

    def compute_encoded_size(self, input_byte_length, chunk_spec):
        raise NotImplementedError("fzmod archives vary in size")

    def _encode_sync(self, chunk_array, chunk_spec):
        archive = fzmod.compress(
            chunk_array.as_numpy_array(),
            preset=self.preset,
            mode=self.mode,
            bound=self.bound,
            backend=self.backend,
            pipeline=self.pipeline,
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
