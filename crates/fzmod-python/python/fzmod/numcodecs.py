"""fzmod as a numcodecs codec (``id: "fzmod"``), e.g. the compressor of a Zarr v2-format
array. Registered through the ``numcodecs.codecs`` entry point, so ``numcodecs.get_codec``
and Zarr find it from an array's metadata without ``import fzmod``.

The archive records the chunk's shape and dtype, so decoding needs no configuration.
``mode="rel"`` is relative to each chunk's value range (``fzmod.xarray.encoding`` sets an
absolute bound from a whole variable's range instead).

Masked data (land as NaN, a CF ``_FillValue``, NaN padding of a partial edge chunk): give
``mask_nan=True`` and/or ``fill_value=v`` (numcodecs does not tell a codec the array's fill
value); a Mask stage then runs in front of the preset, as with ``fzmod.compress``.
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
        mask_nan: bool = False,
        fill_value: Optional[float] = None,
    ) -> None:
        self.pipeline = fzmod.pipeline_text(pipeline)
        self.preset = fzmod.DEFAULT_PRESET if preset is None else preset
        self.mask_nan, self.fill_value = _mask_settings(mask_nan, fill_value)
        resolved = fzmod.resolve_bound(
            self.preset, mode, bound, backend, self.pipeline, mask_nan=self.mask_nan, fill_value=self.fill_value
        )
        self.mode, self.bound = resolved if resolved is not None else (None, None)
        self.backend = backend

    def get_config(self) -> dict:
        config = super().get_config()
        # Without a mask the configuration stays as earlier versions wrote it.
        if not self.mask_nan:
            del config["mask_nan"]
        if self.fill_value is None:
            del config["fill_value"]
        return config

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
            buf,
            preset=self.preset,
            mode=self.mode,
            bound=self.bound,
            backend=self.backend,
            pipeline=self.pipeline,
            mask_nan=self.mask_nan,
            fill_value=self.fill_value,
        )

    def decode(self, buf, out=None):
        decoded = fzmod.decompress(buf, backend=self.backend)
        return decoded if out is None else ndarray_copy(decoded, out)


def _mask_settings(mask_nan, fill_value):
    """(mask_nan, fill_value) as stored: a NaN fill value is NaN masking, and a fill value
    masks NaN too (as ``fzmod.compress`` does); JSON-safe (no NaN)."""
    if fill_value is None:
        return mask_nan, None
    fill_value = float(fill_value)
    return True, (None if fill_value != fill_value else fill_value)
