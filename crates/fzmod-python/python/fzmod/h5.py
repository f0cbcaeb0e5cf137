"""fzmod as an HDF5 filter for h5py, in the style of hdf5plugin's classes::

    import fzmod.h5, h5py
    with h5py.File("out.h5", "w") as f:
        f.create_dataset("t", data=a, chunks=(64, 64), **fzmod.h5.Fzmod(mode="abs", bound=1e-3))

The filter id (400) is from HDF5's range for testing (256-511) and is not registered with
The HDF Group. The filter's ``cd_values`` carry the preset and bound given here; when the
dataset is created the plugin (crates/fzmod-hdf5) adds the dataset's own element type and
chunk shape (HDF5's ``set_local``; layout: crates/fzmod-hdf5/src/params.rs), and refuses
datasets it cannot compress (anything but float32/float64): the creation fails, nothing is
stored uncompressed behind your back. ``mode="rel"`` is relative to each chunk's value range
(``fzmod.xarray.encoding`` sets an absolute bound from a whole variable's range instead).

Masked data: ``mask_nan=True`` and/or ``fill_value=v`` (a CF ``_FillValue``, land marker) put
a Mask stage in front of the preset, as with ``fzmod.compress``; ``create_dataset`` takes the
dataset's ``fillvalue=`` as the fill value to mask unless told otherwise. These settings use
cd_values layout 2 (layout 1 without a mask, readable by earlier plugins).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import Any, Optional, Tuple

import numpy

import fzmod

from . import _hdf5_plugin

FILTER_ID = 400
CD_LAYOUT_VERSION = 1
CD_LAYOUT_VERSION_MASKED = 2
_MASK_NAN, _MASK_FILL = 1, 4
# Fixed forever, as in crates/fzmod-hdf5/src/params.rs.
PRESET_IDS = {
    "cuszp": 0,
    "cuszp2": 1,
    "cuszp3-fixed": 2,
    "cuszp3-plain": 3,
    "cuszp3-outlier": 4,
    "fzgpu": 5,
    "pfpl": 6,
    "mans": 7,
    "cusz": 8,
    "interp": 9,
    "interp-fast": 10,
}
_MODE_CODES = {"abs": 0, "rel": 1}


class Fzmod(Mapping):
    """Keyword arguments for ``h5py.Group.create_dataset``: ``compression`` (the filter id)
    and ``compression_opts`` (the cd_values of the preset and bound, as for
    ``fzmod.compress``). Dtype and chunk shape come from the dataset itself."""

    filter_id = FILTER_ID

    def __init__(
        self,
        preset: Optional[str] = None,
        mode: Optional[str] = None,
        bound: Optional[float] = None,
        *,
        mask_nan: bool = False,
        fill_value: Optional[float] = None,
    ):
        _ensure_plugin()
        self.filter_options = cd_values(preset, mode, bound, mask_nan=mask_nan, fill_value=fill_value)
        self._kwargs = {"compression": FILTER_ID, "compression_opts": self.filter_options}

    def __getitem__(self, key: str) -> Any:
        return self._kwargs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kwargs)

    def __len__(self) -> int:
        return len(self._kwargs)

    def __repr__(self) -> str:
        return f"fzmod.h5.Fzmod(filter_id={FILTER_ID}, cd_values={self.filter_options})"


def create_dataset(
    group: Any,
    name: str,
    data: Any,
    chunks: Tuple[int, ...],
    preset: Optional[str] = None,
    mode: Optional[str] = None,
    bound: Optional[float] = None,
    *,
    mask_nan: bool = False,
    fill_value: Any = "fillvalue",
    **kwargs: Any,
) -> Any:
    """``group.create_dataset(name, data=data, chunks=chunks, ...)`` with the fzmod filter.
    ``fill_value`` (default: the dataset's ``fillvalue=`` if given, else none) and
    ``mask_nan`` as for ``Fzmod``."""
    data = numpy.asarray(data)
    if isinstance(fill_value, str) and fill_value == "fillvalue":
        fill_value = kwargs.get("fillvalue")
    options = Fzmod(preset, mode, bound, mask_nan=mask_nan, fill_value=fill_value)
    return group.create_dataset(name, data=data, chunks=tuple(chunks), **options, **kwargs)


def cd_values(
    preset: Optional[str] = None,
    mode: Optional[str] = None,
    bound: Optional[float] = None,
    *,
    mask_nan: bool = False,
    fill_value: Optional[float] = None,
) -> tuple:
    """The filter's cd_values (unsigned 32-bit words) for these settings, under the bound
    policy of ``fzmod.compress`` (``fzmod.resolve_bound``); with a mask, layout 2."""
    preset = fzmod.DEFAULT_PRESET if preset is None else preset
    if preset not in PRESET_IDS:
        raise fzmod.InvalidArgument(f"preset {preset!r} has no HDF5 id (known: {', '.join(PRESET_IDS)})")
    # Presets always carry a bound.
    mode, bound = fzmod.resolve_bound(preset, mode, bound, mask_nan=mask_nan, fill_value=fill_value)
    low, high = struct.unpack("<II", struct.pack("<d", bound))
    if fill_value is not None:
        fill_value = float(fill_value)
        mask_nan = True  # a fill value masks NaN too; a NaN fill value is NaN masking
        if fill_value != fill_value:
            fill_value = None
    if not mask_nan:
        return (CD_LAYOUT_VERSION, PRESET_IDS[preset], _MODE_CODES[mode], low, high)
    flags = _MASK_NAN | (_MASK_FILL if fill_value is not None else 0)
    fill_low, fill_high = struct.unpack("<II", struct.pack("<d", 0.0 if fill_value is None else fill_value))
    return (CD_LAYOUT_VERSION_MASKED, PRESET_IDS[preset], _MODE_CODES[mode], low, high, flags, fill_low, fill_high)


def _ensure_plugin():
    # A source tree without the built plugin still works when HDF5_PLUGIN_PATH points to it.
    if _hdf5_plugin.available():
        _hdf5_plugin.append_to_h5py()
