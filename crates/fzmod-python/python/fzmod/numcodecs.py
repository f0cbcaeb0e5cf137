"""fzmod as a numcodecs codec (``id: "fzmod"``), e.g. the compressor of a Zarr v2-format
array. Registered through the ``numcodecs.codecs`` entry point, so ``numcodecs.get_codec``
and Zarr find it from an array's metadata without ``import fzmod``.

The archive records the chunk's shape and dtype, so decoding needs no configuration.
``mode="rel"`` is relative to each chunk's value range (``fzmod.xarray.encoding`` sets an
absolute bound from a whole variable's range instead).
"""

from typing import Optional

from numcodecs.abc import Codec
from numcodecs.compat import ndarray_copy

import fzmod


class Fzmod(Codec):
    """Error-bounded compression of float32/float64 chunks.

    preset, mode, bound, backend, pipeline: as for ``fzmod.compress``, checked here (a wrong
    setting raises ``fzmod.InvalidArgument`` now, not on the first chunk). The configuration
    records the bound the codec runs at, so it states the guarantee; ``pipeline`` is stored as
    TOML text so the configuration stays JSON.
    """

    codec_id = "fzmod"

    def __init__(
        self,
        preset: Optional[str] = None,
        mode: Optional[str] = None,
        bound: Optional[float] = None,
        backend: str = "auto",
        pipeline: fzmod.Pipeline = None,
    ) -> None:
        self.pipeline = fzmod.pipeline_text(pipeline)
        self.preset = fzmod.DEFAULT_PRESET if preset is None else preset
        resolved = fzmod.resolve_bound(self.preset, mode, bound, backend, self.pipeline)
        self.mode, self.bound = resolved if resolved is not None else (None, None)
        self.backend = backend

    @classmethod
    def from_config(cls, config: dict) -> "Fzmod":
        # numcodecs.get_codec strips "id"; accept get_config()'s output as it is too.
        settings = {k: v for k, v in config.items() if k != "id"}
        try:
            return cls(**settings)
        except TypeError as e:  # an unknown key: a configuration this version cannot honour
            raise fzmod.InvalidArgument(f"fzmod codec configuration: {e}") from None

    def encode(self, buf):
        return fzmod.compress(
            buf, preset=self.preset, mode=self.mode, bound=self.bound, backend=self.backend, pipeline=self.pipeline
        )

    def decode(self, buf, out=None):
        decoded = fzmod.decompress(buf, backend=self.backend)
        return decoded if out is None else ndarray_copy(decoded, out)
