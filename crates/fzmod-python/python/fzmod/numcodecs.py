"""fzmod as a numcodecs codec (``id: "fzmod"``), e.g. the compressor of a Zarr v2-format
array. Registered through the ``numcodecs.codecs`` entry point, so ``numcodecs.get_codec``
and Zarr find it from an array's metadata without ``import fzmod``.

The archive records the chunk's shape and dtype, so decoding needs no configuration.
``mode="rel"`` is relative to each chunk's value range.
"""

from numcodecs.abc import Codec
from numcodecs.compat import ndarray_copy

import fzmod


class Fzmod(Codec):
    """Error-bounded compression of float32/float64 chunks.

    preset, mode, bound, backend, pipeline: as for ``fzmod.compress``; ``pipeline`` is stored
    as TOML text so the configuration stays JSON.
    """

    codec_id = "fzmod"

    def __init__(self, preset="cuszp2", mode="rel", bound=1e-3, backend="auto", pipeline=None):
        self.preset = preset
        self.mode = mode
        self.bound = None if bound is None else float(bound)
        self.backend = backend
        self.pipeline = fzmod.pipeline_text(pipeline)
        if self.pipeline is None and preset not in fzmod.presets():
            raise fzmod.InvalidArgument(f"unknown preset {preset!r} (known: {', '.join(fzmod.presets())})")

    @classmethod
    def from_config(cls, config):
        # numcodecs.get_codec strips "id"; accept get_config()'s output as it is too.
        return cls(**{k: v for k, v in config.items() if k != "id"})

    def encode(self, buf):
        return fzmod.compress(
            buf, preset=self.preset, mode=self.mode, bound=self.bound, backend=self.backend, pipeline=self.pipeline
        )

    def decode(self, buf, out=None):
        decoded = fzmod.decompress(buf, backend=self.backend)
        return decoded if out is None else ndarray_copy(decoded, out)
